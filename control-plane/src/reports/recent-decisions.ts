// The last N routing decisions reported by gateways, for the status API and dashboard feed.
import type { FinishedRequest } from "./report-codec.ts";

export interface Decision extends FinishedRequest {
  gateway: string;
  atMs: number;
}

export class RecentDecisions {
  readonly #ring: Decision[] = [];
  #next = 0;

  constructor(readonly capacity = 200) {}

  add(d: Decision): void {
    if (this.#ring.length < this.capacity) this.#ring.push(d);
    else this.#ring[this.#next] = d;
    this.#next = (this.#next + 1) % this.capacity;
  }

  /** Newest first. */
  list(): Decision[] {
    const n = this.#ring.length;
    const out: Decision[] = [];
    for (let i = 1; i <= n; i++) out.push(this.#ring[(this.#next - i + n * 2) % n] as Decision);
    return out;
  }
}
