// Polls every engine's /metrics page on a fixed period. A source: it reports parsed pages or
// failures and decides nothing. A slow target is not polled again until its previous scrape
// ends, so a hung engine cannot pile up requests.
import type { ScrapeOutcome, ScrapeTarget } from "../vocabulary/load.ts";
import { parseEngineMetrics } from "./engine-metrics.ts";

export interface ScraperOptions {
  intervalMs: number;
  timeoutMs: number;
  onResult: (target: ScrapeTarget, outcome: ScrapeOutcome) => void;
}

export async function scrapeOnce(target: ScrapeTarget, timeoutMs: number): Promise<ScrapeOutcome> {
  try {
    const res = await fetch(target.url, { signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    if (!res.ok) return { ok: false, error: `HTTP ${res.status}` };
    return { ok: true, metrics: parseEngineMetrics(text, target.modelName) };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    return { ok: false, error: e.cause?.code ?? e.name ?? e.message };
  }
}

export class MetricsScraper {
  #targets = new Map<string, ScrapeTarget>();
  readonly #inFlight = new Set<string>();
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: ScraperOptions) {}

  setTargets(targets: ScrapeTarget[]): void {
    this.#targets = new Map(targets.map((t) => [t.key, t]));
  }

  start(): void {
    if (this.#timer !== undefined) return;
    void this.tick();
    this.#timer = setInterval(() => void this.tick(), this.opts.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One round over every target not still busy; resolves when the round's scrapes end. */
  async tick(): Promise<void> {
    const round = [...this.#targets.values()].filter((t) => !this.#inFlight.has(t.key));
    await Promise.all(
      round.map(async (t) => {
        this.#inFlight.add(t.key);
        try {
          const outcome = await scrapeOnce(t, this.opts.timeoutMs);
          // Dropped from the target list while in flight: its result no longer matters.
          if (this.#targets.get(t.key) === t) this.opts.onResult(t, outcome);
        } finally {
          this.#inFlight.delete(t.key);
        }
      }),
    );
  }
}
