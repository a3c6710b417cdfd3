// The shared-data keys through which one gateway's VMs count each other's requests
// (docs/wire-format.md §4): kvr.un.<t>, each VM's own per slot — stamp u64 (ms), then (slot u16,
// unanswered u32, their uncached tokens u32, unanswered unseen u32, decoding unseen u32) —
// rewritten whenever they change and on every tick; and kvr.ifr, the most the leader reported per
// slot lately (its share of kvr.load's fleet count) — stamp u64, then (slot u16, requests u32).
import { ByteBuf } from "../core/byte-buf";
import { LocalQueue, ReportedMax } from "../core/queued-work";
import { getShared, SharedValue, setShared } from "./host";

export const THREADS_KEY = "kvr.threads";
export const REPORTED_KEY = "kvr.ifr";
/**
 * In-flight keys kvr.un.<t> are bounded by this many VM slots: a slot is reused once its owner's
 * lease lapsed (thread-slot.ts), and a VM that finds them all held goes without one.
 */
export const MAX_THREADS: u32 = 1024;

/** A VM's in-flight counts count while their stamp is this recent: 5 ticks, at least 500 ms. */
export function inflightFreshMs(tickMs: u32): u64 {
  const five = <u64>tickMs * 5;
  return five > 500 ? five : 500;
}

const ENTRY = 18;

/** `kvr.un.<t>` for each VM slot, built once: every decision reads the siblings' keys. */
const unseenKeys = new Array<string>(0);
function unseenKey(t: u32): string {
  while (<u32>unseenKeys.length <= t) unseenKeys.push(`kvr.un.${unseenKeys.length}`);
  return unseenKeys[t];
}

/** The stamp (ms) of kvr.un.<t>, 0 when it is absent or malformed. */
export function unseenStamp(t: u32, r: SharedValue): u64 {
  getShared(unseenKey(t), r);
  const v = r.value;
  return v === null || v.byteLength < 8 ? 0 : load<u64>(changetype<usize>(v));
}

/**
 * Reads every fresh kvr.un.<t> but `exclude`'s: into `queue`'s gateway view when given, and the
 * unseen unanswered requests into `unseen` (slot → requests) when given. A VM that stopped
 * publishing (it failed and was replaced, its thread stalls) drops out after a few ticks, so the
 * requests of a failed VM are not counted next to its replacement's for long.
 */
export function readSiblings(
  r: SharedValue,
  tickMs: u32,
  now: u64,
  exclude: i32,
  queue: LocalQueue | null,
  unseen: Map<i32, u32> | null,
): void {
  getShared(THREADS_KEY, r);
  const threads: u32 =
    r.value !== null && r.value!.byteLength === 4 ? load<u32>(changetype<usize>(r.value!)) : 0;
  const n = threads < MAX_THREADS ? threads : MAX_THREADS;
  const freshMs = inflightFreshMs(tickMs);
  for (let t: u32 = 0; t < n; t++) {
    if (<i32>t === exclude) continue;
    getShared(unseenKey(t), r);
    const v = r.value;
    if (v === null || v.byteLength < 8) continue;
    const p = changetype<usize>(v);
    if (load<u64>(p) + freshMs < now) continue;
    for (let at = 8; at + ENTRY <= v.byteLength; at += ENTRY) {
      const e = p + <usize>at;
      const slot = <i32>load<u16>(e);
      const u = load<u32>(e + 10);
      if (queue !== null)
        queue.addSiblings(slot, load<u32>(e + 2), <f64>load<u32>(e + 6), u, load<u32>(e + 14));
      if (unseen !== null && u > 0) unseen.set(slot, (unseen.has(slot) ? unseen.get(slot) : 0) + u);
    }
  }
}

/** This VM's kvr.un.<t>, stamped `now`. */
export function writeUnseen(thread: i32, queue: LocalQueue, now: u64, b: ByteBuf): void {
  const n = queue.slots;
  b.len = 0;
  b.reserve(8 + n * ENTRY);
  store<u64>(b.ptr, now);
  b.len = 8;
  for (let s = 0; s < n; s++) {
    const pending = <u32>queue.countAt(s);
    const decoding = queue.unseenDecodingAt(s);
    if (pending === 0 && decoding === 0) continue;
    const e = b.ptr + <usize>b.len;
    const tokens = queue.tokensAt(s);
    store<u16>(e, <u16>s);
    store<u32>(e + 2, pending);
    store<u32>(e + 6, tokens < 4294967295 ? <u32>tokens : 4294967295);
    store<u32>(e + 10, queue.unseenPendingAt(s));
    store<u32>(e + 14, decoding);
    b.len += ENTRY;
  }
  setShared(unseenKey(<u32>thread), b.ptr, b.len, 0);
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
 * Before a decision and on every tick: the other VMs' requests and the leader's reported share,
 * into the queue's gateway view.
 */
export function refreshGatewayView(queue: LocalQueue, me: i32, r: SharedValue, tickMs: u32, now: u64): void {
  queue.clearGatewayView();
  readSiblings(r, tickMs, now, me, queue, null);
  getShared(REPORTED_KEY, r);
  const v = r.value;
  if (v === null || v.byteLength < 8) return;
  const p = changetype<usize>(v);
  for (let at = 8; at + 6 <= v.byteLength; at += 6)
    queue.setGatewayReported(<i32>load<u16>(p + <usize>at), load<u32>(p + <usize>at + 2));
}
