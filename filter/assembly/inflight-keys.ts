// The shared-data keys through which one gateway's VMs see each other's unseen requests
// (docs/wire-format.md §4): kvr.if.<t>, each VM's own counts, written on its every tick; and
// kvr.ifr, the most the leader reported per slot lately (its share of kvr.load's fleet count).
// Both: stamp u64 (ms), then (slot u16, requests u32) pairs.
import { ByteBuf } from "../core/byte-buf";
import { LocalQueue, ReportedMax } from "../core/queued-work";
import { getShared, SharedValue, setShared } from "./host";

export const THREADS_KEY = "kvr.threads";
export const REPORTED_KEY = "kvr.ifr";
/** In-flight keys kvr.if.<t> are bounded by this many VM slots (more wrap around). */
export const MAX_THREADS: u32 = 1024;

/** A VM's in-flight counts count while their stamp is this recent: 5 ticks, at least 500 ms. */
export function inflightFreshMs(tickMs: u32): u64 {
  const five = <u64>tickMs * 5;
  return five > 500 ? five : 500;
}

/**
 * Sums every fresh kvr.if.<t> but `exclude`'s into `sums` (slot → requests). A VM that stopped
 * publishing (it failed and was replaced, its thread stalls) drops out after a few ticks, so the
 * requests of a failed VM are not counted next to its replacement's for long.
 */
export function sumInflight(r: SharedValue, tickMs: u32, now: u64, exclude: i32, sums: Map<i32, u32>): void {
  getShared(THREADS_KEY, r);
  const threads: u32 =
    r.value !== null && r.value!.byteLength === 4 ? load<u32>(changetype<usize>(r.value!)) : 0;
  const n = threads < MAX_THREADS ? threads : MAX_THREADS;
  const freshMs = inflightFreshMs(tickMs);
  for (let t: u32 = 0; t < n; t++) {
    if (<i32>t === exclude) continue;
    getShared(`kvr.if.${t}`, r);
    const v = r.value;
    if (v === null || v.byteLength < 8) continue;
    const p = changetype<usize>(v);
    if (load<u64>(p) + freshMs < now) continue;
    for (let at = 8; at + 6 <= v.byteLength; at += 6) {
      const slot = <i32>load<u16>(p + <usize>at);
      const c = load<u32>(p + <usize>at + 2);
      sums.set(slot, (sums.has(slot) ? sums.get(slot) : 0) + c);
    }
  }
}

/** Writes `counts` (non-zero slots) stamped `now` under `key`. */
export function writeCounts(key: string, counts: StaticArray<u32>, now: u64, b: ByteBuf): void {
  b.len = 0;
  b.reserve(8 + counts.length * 6);
  store<u64>(b.ptr, now);
  b.len = 8;
  for (let s = 0; s < counts.length; s++) {
    const n = counts[s];
    if (n === 0) continue;
    store<u16>(b.ptr + <usize>b.len, <u16>s);
    store<u32>(b.ptr + <usize>b.len + 2, n);
    b.len += 6;
  }
  setShared(key, b.ptr, b.len, 0);
}

/** The leader's kvr.ifr: what `reported` holds per slot. */
export function writeReported(reported: ReportedMax, now: u64, b: ByteBuf): void {
  const n = reported.slots;
  const counts = new StaticArray<u32>(n);
  for (let s = 0; s < n; s++) counts[s] = reported.at(s);
  writeCounts(REPORTED_KEY, counts, now, b);
}

/**
 * On a VM's tick: the other VMs' unseen requests and the leader's reported share, into the
 * queue's gateway view (read by every decision until the next tick).
 */
export function refreshGatewayView(queue: LocalQueue, me: i32, r: SharedValue, tickMs: u32, now: u64): void {
  queue.clearGatewayView();
  const sums = new Map<i32, u32>();
  sumInflight(r, tickMs, now, me, sums);
  const keys = sums.keys();
  for (let i = 0; i < keys.length; i++) queue.addSiblings(keys[i], sums.get(keys[i]));
  getShared(REPORTED_KEY, r);
  const v = r.value;
  if (v === null || v.byteLength < 8) return;
  const p = changetype<usize>(v);
  for (let at = 8; at + 6 <= v.byteLength; at += 6)
    queue.setGatewayReported(<i32>load<u16>(p + <usize>at), load<u32>(p + <usize>at + 2));
}
