// Per-slot load and health, folded from scrapes of the engines' /metrics and from gateway
// reports. A slot turns unhealthy after `unhealthyAfter` consecutive failures (scrape errors
// or connection errors reported by gateways) and healthy again on the first success.
import type { RankLoad } from "../vocabulary/load.ts";

/** The slot's LoRA adapters as its engine reports them (vllm:lora_requests_info). */
export interface SlotLora {
  /** Adapters the engine can hold in GPU memory at once (vLLM --max-loras). */
  maxLoras: number;
  running: string[];
  waiting: string[];
}

export interface SlotLoad extends Omit<RankLoad, "lora"> {
  /** null: the engine reports no adapters (LoRA off, or not vLLM). */
  lora: SlotLora | null;
  healthy: boolean;
  consecutiveFailures: number;
  lastOkMs: number;
  /** Requests in flight on this slot summed over every gateway's latest report. */
  inflight: number;
  /** Exponentially weighted TTFT from gateway reports (ms); 0 until the first report. */
  ttftMs: number;
}

export class LoadModel {
  readonly #loads = new Map<number, SlotLoad>();
  readonly #inflightByGateway = new Map<string, Map<number, number>>();
  readonly #gatewaySeenMs = new Map<string, number>();
  #changed = true;
  #gatewaysChanged = true;

  constructor(private readonly unhealthyAfter: number) {}

  #get(slot: number): SlotLoad {
    let l = this.#loads.get(slot);
    if (l === undefined) {
      // A new slot is routable until proven otherwise: discovery just saw it answer.
      l = {
        running: 0,
        waiting: 0,
        kvUsage: 0,
        healthy: true,
        consecutiveFailures: 0,
        lastOkMs: 0,
        inflight: 0,
        ttftMs: 0,
        lora: null,
      };
      this.#loads.set(slot, l);
    }
    return l;
  }

  get(slot: number): SlotLoad {
    return this.#get(slot);
  }

  scraped(slot: number, load: RankLoad, nowMs: number): void {
    const l = this.#get(slot);
    if (l.running !== load.running || l.waiting !== load.waiting || l.kvUsage !== load.kvUsage || !l.healthy)
      this.#changed = true;
    l.running = load.running;
    l.waiting = load.waiting;
    l.kvUsage = load.kvUsage;
    const lora = load.lora ?? null;
    if (!sameLora(l.lora, lora)) this.#changed = true;
    l.lora = lora;
    l.consecutiveFailures = 0;
    l.healthy = true;
    l.lastOkMs = nowMs;
  }

  failed(slot: number): void {
    const l = this.#get(slot);
    l.consecutiveFailures++;
    if (l.healthy && l.consecutiveFailures >= this.unhealthyAfter) {
      l.healthy = false;
      this.#changed = true;
    }
  }

  /** A gateway's current in-flight counts per slot (replaces its previous report). */
  gatewayInflight(gateway: string, perSlot: Map<number, number>, nowMs = Date.now()): void {
    if (!this.#gatewaySeenMs.has(gateway)) this.#gatewaysChanged = true;
    this.#gatewaySeenMs.set(gateway, nowMs);
    this.#setInflight(gateway, perSlot);
  }

  /** Forgets gateways that stopped reporting (crashed, scaled down): their requests are gone too. */
  expireGateways(nowMs: number, maxAgeMs: number): void {
    for (const [gateway, seen] of this.#gatewaySeenMs) {
      if (nowMs - seen <= maxAgeMs) continue;
      this.#gatewaySeenMs.delete(gateway);
      this.#gatewaysChanged = true;
      this.#setInflight(gateway, new Map());
      this.#inflightByGateway.delete(gateway);
    }
  }

  #setInflight(gateway: string, perSlot: Map<number, number>): void {
    const before = this.#inflightByGateway.get(gateway);
    this.#inflightByGateway.set(gateway, perSlot);
    const touched = new Set([...(before?.keys() ?? []), ...perSlot.keys()]);
    for (const slot of touched) {
      let sum = 0;
      for (const m of this.#inflightByGateway.values()) sum += m.get(slot) ?? 0;
      const l = this.#get(slot);
      if (l.inflight !== sum) this.#changed = true;
      l.inflight = sum;
    }
  }

  /** Folds one observed TTFT into the slot's moving average. */
  ttftObserved(slot: number, ttftMs: number): void {
    const l = this.#get(slot);
    l.ttftMs = l.ttftMs === 0 ? ttftMs : 0.8 * l.ttftMs + 0.2 * ttftMs;
    this.#changed = true;
  }

  takeChanged(): boolean {
    const c = this.#changed;
    this.#changed = false;
    return c;
  }

  /** The ids of the gateways that report now (the kvr.gw roster), sorted. */
  gateways(): string[] {
    return [...this.#gatewaySeenMs.keys()].sort();
  }

  /** Whether a gateway came or went since the last call. */
  takeGatewaysChanged(): boolean {
    const c = this.#gatewaysChanged;
    this.#gatewaysChanged = false;
    return c;
  }
}

function sameLora(a: SlotLora | null, b: SlotLora | null): boolean {
  if (a === null || b === null) return a === b;
  const same = (x: string[], y: string[]) => x.length === y.length && x.every((v, i) => v === y[i]);
  return a.maxLoras === b.maxLoras && same(a.running, b.running) && same(a.waiting, b.waiting);
}
