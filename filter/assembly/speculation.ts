// This gateway's speculative routes in shared data (filter/core/speculative.ts has the layout):
// looked up before scoring, recorded after routing. Best effort: a lost CAS race skips the
// write — the control plane's copy of the route (from the report) follows anyway.
import { ByteBuf } from "../core/byte-buf";
import { checkpoints, specKey, specLookup, specUpdate } from "../core/speculative";
import { getShared, OK, SharedValue, setShared } from "./host";

const CAS_ATTEMPTS: i32 = 3;

export class Speculation {
  /** Slot of the last find(), -1 when none. */
  slot: i32 = -1;
  private read: SharedValue = new SharedValue();
  private out: ByteBuf = new ByteBuf(256);
  private depths: ByteBuf = new ByteBuf(256);

  private probe(hashes: usize, depth: i32, nowMs: u64): i32 {
    const h = load<u64>(hashes + ((<usize>(depth - 1)) << 3));
    getShared(`kvr.s.${specKey(h)}`, this.read);
    const v = this.read.value;
    if (v === null) return -1;
    return specLookup(changetype<usize>(v), v.byteLength, h, <u32>depth, nowMs);
  }

  /**
   * The deepest recorded checkpoint of this prompt (0 when none) and its slot in `slot`. Every
   * routed prompt records chunk 1, so a miss there ends the search after one read.
   */
  find(hashes: usize, count: i32, nowMs: u64): i32 {
    this.slot = -1;
    if (count <= 0) return 0;
    const first = this.probe(hashes, 1, nowMs);
    if (first < 0) return 0;
    const n = checkpoints(count, this.depths);
    for (let i = 0; i < n; i++) {
      const d = load<i32>(this.depths.ptr + ((<usize>i) << 2));
      if (d <= 1) break;
      const s = this.probe(hashes, d, nowMs);
      if (s >= 0) {
        this.slot = s;
        return d;
      }
    }
    this.slot = first;
    return 1;
  }

  /** Records that this prompt's checkpoints are going to `slot` until now + ttl. */
  record(hashes: usize, count: i32, slot: i32, ttlMs: u32, nowMs: u64): void {
    const n = checkpoints(count, this.depths);
    const r = this.read;
    for (let i = 0; i < n; i++) {
      const d = load<i32>(this.depths.ptr + ((<usize>i) << 2));
      const h = load<u64>(hashes + ((<usize>(d - 1)) << 3));
      const key = `kvr.s.${specKey(h)}`;
      for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
        getShared(key, r);
        const v = r.value;
        specUpdate(
          v === null ? 0 : changetype<usize>(v),
          v === null ? 0 : v.byteLength,
          h,
          <u32>d,
          slot,
          nowMs + <u64>ttlMs,
          nowMs,
          this.out,
        );
        if (setShared(key, this.out.ptr, this.out.len, v === null ? 0 : r.cas) === OK) break;
      }
    }
  }
}
