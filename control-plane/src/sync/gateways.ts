// Which gateways poll us and how far behind they are, for the status API and metrics.

export interface GatewayState {
  id: string;
  remoteAddress: string;
  /** The version the gateway held when it last asked. */
  version: number;
  lastSeenMs: number;
  polls: number;
  resets: number;
}

export class GatewayRegistry {
  readonly #gateways = new Map<string, GatewayState>();

  constructor(
    private readonly now: () => number = Date.now,
    private readonly forgetAfterMs = 10 * 60_000,
  ) {}

  seen(id: string, remoteAddress: string, version: number, reset: boolean): void {
    const g = this.#gateways.get(id) ?? { id, remoteAddress, version, lastSeenMs: 0, polls: 0, resets: 0 };
    g.remoteAddress = remoteAddress;
    g.version = version;
    g.lastSeenMs = this.now();
    g.polls++;
    if (reset) g.resets++;
    this.#gateways.set(id, g);
  }

  /** Gateways seen recently, oldest entries forgotten so an autoscaled fleet does not grow this map forever. */
  list(): GatewayState[] {
    const cutoff = this.now() - this.forgetAfterMs;
    for (const [id, g] of this.#gateways) if (g.lastSeenMs < cutoff) this.#gateways.delete(id);
    return [...this.#gateways.values()].sort((a, b) => a.id.localeCompare(b.id));
  }
}
