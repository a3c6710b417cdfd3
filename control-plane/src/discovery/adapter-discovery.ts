// Reads every endpoint's OpenAI-compatible /v1/models on a fixed period and reports the model
// cards to the adapter catalog (model/adapter-catalog.ts): vLLM lists each LoRA adapter it serves
// with its base model as `parent`, including adapters loaded at runtime (/v1/load_lora_adapter).
// A source: it reports what it read and decides nothing; a failed read is reported as nothing.
import type { ModelCard } from "../vocabulary/models.ts";

export interface ModelsTarget {
  pool: string;
  /** The engine's HTTP base, e.g. http://10.0.0.5:8000 */
  base: string;
}

export interface AdapterDiscoveryOptions {
  intervalMs: number;
  timeoutMs: number;
  targets: () => ModelsTarget[];
  onCards: (pool: string, cards: ModelCard[]) => void;
}

/** Bodies larger than this are not model lists (vLLM's is a few hundred bytes per model). */
const MAX_BODY = 1 << 20;

export async function readModels(base: string, timeoutMs: number): Promise<ModelCard[] | null> {
  try {
    const res = await fetch(`${base}/v1/models`, { signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    if (!res.ok || text.length > MAX_BODY) return null;
    return parseModelList(JSON.parse(text));
  } catch {
    return null;
  }
}

export class AdapterDiscovery {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | null = null;

  constructor(private readonly o: AdapterDiscoveryOptions) {}

  start(): void {
    if (this.#timer !== undefined) return;
    void this.tick();
    this.#timer = setInterval(() => void this.tick(), this.o.intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  /** One round over every endpoint; a round still running is not started again. */
  tick(): Promise<void> {
    if (this.#running !== null) return this.#running;
    const round = async () => {
      const targets = this.o.targets();
      const results = await Promise.all(targets.map((t) => readModels(t.base, this.o.timeoutMs)));
      targets.forEach((t, i) => {
        const cards = results[i];
        if (cards != null && this.#timer !== undefined) this.o.onCards(t.pool, cards);
      });
    };
    this.#running = round().finally(() => {
      this.#running = null;
    });
    return this.#running;
  }
}

/** The model cards of a /v1/models body; null when it is not one. */
export function parseModelList(body: unknown): ModelCard[] | null {
  if (typeof body !== "object" || body === null) return null;
  const data = (body as { data?: unknown }).data;
  if (!Array.isArray(data)) return null;
  const out: ModelCard[] = [];
  for (const d of data) {
    if (typeof d !== "object" || d === null) continue;
    const { id, parent } = d as { id?: unknown; parent?: unknown };
    if (typeof id !== "string") continue;
    out.push({ id, parent: typeof parent === "string" ? parent : null });
  }
  return out;
}
