// Long loops on the event loop, cut into slices. Re-applying an engine's replay buffer (vLLM
// keeps buffer_steps = 10 000 batches) or the live messages held meanwhile decodes and indexes
// every batch; done in one go it kept /healthz, /v1/sync and every other rank waiting for
// seconds. A loop asks `due()` before each item and awaits `yield()` when it says so.

import { performance } from "node:perf_hooks";

/** Items per slice at most: bounds a slice even where the clock is coarse. */
export const SLICE_ITEMS = 256;
/** Time per slice at most. About 280 µs per batch went into the 10 000-batch rebuild that held
 * /healthz for 2.8 s, so a slice of 256 such batches would take ~70 ms: the time bound is what
 * keeps a turn of the event loop within a few milliseconds. */
export const SLICE_MS = 4;

export class Slicer {
  private items = 0;
  private start = performance.now();

  /** True when the current slice is full: the caller should yield before the next item. */
  due(): boolean {
    if (++this.items <= 1) return false;
    return this.items > SLICE_ITEMS || performance.now() - this.start >= SLICE_MS;
  }

  /** Lets timers, I/O and other ranks run (setImmediate: after pending I/O callbacks), then
   * starts a new slice. */
  async yield(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.items = 1;
    this.start = performance.now();
  }
}
