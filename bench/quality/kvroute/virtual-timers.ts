// The clock of kvroute's side of the quality bench: gateways' ticks, control-plane scrapes and
// publications, KV events in transit, HTTP calls in transit — each a task at a virtual time, run
// in time order (ties in the order they were scheduled, so a run is repeatable). The simulated
// engines keep their own event queue; the harness advances both together (harness.ts).
import { EventHeap } from "../../../control-plane/sim/heap.ts";

interface Task {
  timeMs: number;
  priority: number;
  run: () => void;
}

export class VirtualTimers {
  readonly #heap = new EventHeap<Task>();
  #now: number;

  constructor(startMs: number) {
    this.#now = startMs;
  }

  /** Virtual now (ms): the time of the task running, or the last time reached. */
  get now(): number {
    return this.#now;
  }

  /** Runs `run` at `timeMs` (never before now). */
  at(timeMs: number, run: () => void): void {
    this.#heap.push({ timeMs: Math.max(timeMs, this.#now), priority: 0, run });
  }

  after(delayMs: number, run: () => void): void {
    this.at(this.#now + delayMs, run);
  }

  /** `run` every `periodMs` from `firstMs` on, until it returns false. */
  every(firstMs: number, periodMs: number, run: () => boolean | undefined): void {
    const step = (at: number) =>
      this.at(at, () => {
        if (run() !== false) step(at + periodMs);
      });
    step(firstMs);
  }

  /** Runs every task due by `timeMs`, each at its own time, then sets the clock to `timeMs`. */
  runUntil(timeMs: number): void {
    for (let t = this.#heap.peek(); t !== undefined && t.timeMs <= timeMs; t = this.#heap.peek()) {
      this.#heap.pop();
      this.#now = t.timeMs;
      t.run();
    }
    if (timeMs > this.#now) this.#now = timeMs;
  }

  /** When the next task is due (Infinity when none). */
  get nextMs(): number {
    return this.#heap.peek()?.timeMs ?? Number.POSITIVE_INFINITY;
  }
}
