// A VM's own table of recent routes — speculative prefixes (speculative.ts) or sessions
// (session-affinity.ts, depth 0) — in the layout those modules define for one shared-data value,
// SPEC_KEYS cells of SPEC_WAYS entries each, held in the VM's memory instead of shared data. The
// gateway's other VMs learn the same routes from the board's route ring (gateway-board.ts), so a
// lookup reads no shared data. Bounded: a full cell drops its expired or soonest-expiring entry.
import { ByteBuf } from "./byte-buf";
import { SPEC_KEYS, SPEC_WAYS, specExpiry, specKey, specLookup, specUpdate } from "./speculative";

const CELL: i32 = 4 + SPEC_WAYS * 24;

@unmanaged
export class RouteCells {
  private base: usize;
  private scratch: ByteBuf = new ByteBuf(CELL);

  constructor() {
    const bytes = <usize>SPEC_KEYS * <usize>CELL;
    this.base = heap.alloc(bytes);
    memory.fill(this.base, 0, bytes);
  }

  @inline private cell(hash: u64): usize {
    return this.base + <usize>specKey(hash) * <usize>CELL;
  }

  /** The slot of the live entry for `hash` at `depth`, or -1. */
  lookup(hash: u64, depth: u32, nowMs: u64): i32 {
    return specLookup(this.cell(hash), CELL, hash, depth, nowMs);
  }

  /** The expiry of the live entry for `hash` at `depth`, or 0. */
  expiry(hash: u64, depth: u32, nowMs: u64): u64 {
    return specExpiry(this.cell(hash), CELL, hash, depth, nowMs);
  }

  /** `hash` at `depth` goes to `slot` until `expiresMs` (a later record of the same hash replaces it). */
  put(hash: u64, depth: u32, slot: i32, expiresMs: u64, nowMs: u64): void {
    if (expiresMs <= nowMs) return;
    const c = this.cell(hash);
    // An entry that expires later already says more (another VM's newer route came first).
    if (this.expiry(hash, depth, nowMs) > expiresMs) return;
    specUpdate(c, CELL, hash, depth, slot, expiresMs, nowMs, this.scratch);
    memory.copy(c, this.scratch.ptr, <usize>this.scratch.len);
    if (this.scratch.len < CELL)
      memory.fill(c + <usize>this.scratch.len, 0, <usize>(CELL - this.scratch.len));
  }
}
