// The gateway board `kvr.gwb` (docs/wire-format.md §4.5): the one shared-data value a decision
// reads. It carries what one gateway's VMs must learn from each other between ticks — each VM's
// unanswered requests per slot, its LoRA requests in flight per (slot, adapter), the routes they
// just took (speculative prefixes and sessions),
// the leader's reported in-flight share, and which prefix-index buckets the leader's last sync
// pages rewrote (so a VM re-reads only those of its cached buckets). Every VM rewrites it by CAS,
// replacing its own section and appending its records to the rings; a lost race keeps the
// records for the VM's next write. Pure layout code: no host imports.
//
// Layout (little-endian):
//   0  magic "KVGB" u32 · version u16 · reserved u16
//   8  change records appended ever u64 · 16 route records appended ever u64
//   24 reported stamp u64 (ms) · 32 reported count u16 · VM count u16 · flight section count u16
//      · reserved u16
//   40 change ring: CHANGE_RING × u32 (record n at n % CHANGE_RING): a bucket index
//   then route ring: ROUTE_RING × 24 bytes (record n at n % ROUTE_RING): hash u64, expiry u64
//      (ms), depth u32, slot u16, kind u16 (0 speculative prefix, 1 session)
//   then reported: count × (slot u16, requests u32)
//   then VM sections: thread u16, entry count u16, reserved u32, stamp u64 (ms), entries × 22:
//      slot u16, unanswered u32, their uncached tokens u32, unanswered unseen u32, decoding unseen
//      u32, since u32 (ms mod 2^32: when the slot started on the unanswered ones, LocalQueue.since)
//   then flight sections: thread u16, entry count u16, reserved u32, stamp u64 (ms), entries × 8:
//      slot u16, adapter u16 (id in the slot's pool's adapter table), requests in flight u32
// The flight sections come last, after a count in what was a reserved field, so a build that
// knows none reads the rest as before (and its writes drop them: the count it writes is 0).
import { ByteBuf } from "./byte-buf";
import { LocalQueue, ReportedMax } from "./queued-work";

export const BOARD_MAGIC: u32 = 0x4247564b;
/** 2: a VM entry carries its `since` (version 1's entries were 18 bytes). */
export const BOARD_VERSION: u16 = 2;
export const CHANGE_RING: u64 = 256;
export const ROUTE_RING: u64 = 128;
export const ROUTE_BYTES: i32 = 24;
export const ROUTE_SPECULATIVE: u16 = 0;
export const ROUTE_SESSION: u16 = 1;
export const VM_ENTRY: i32 = 22;
export const FLIGHT_ENTRY: i32 = 8;
const VM_HEADER: i32 = 16;
const HEADER: i32 = 40;
const CHANGES_AT: i32 = HEADER;
const ROUTES_AT: i32 = CHANGES_AT + <i32>CHANGE_RING * 4;
export const BOARD_FIXED: i32 = ROUTES_AT + <i32>ROUTE_RING * ROUTE_BYTES;

/** A board value at p, checked once: the offsets of its variable part. */
export class BoardView {
  ptr: usize = 0;
  len: i32 = 0;
  changeSeq: u64 = 0;
  routeSeq: u64 = 0;
  reportedStamp: u64 = 0;
  reportedCount: i32 = 0;
  vmCount: i32 = 0;
  /** Offset of the VM sections. */
  sectionsAt: i32 = 0;
  /** Flight sections (0 when their count or sizes do not fit: they are ignored) and their offset. */
  flightCount: i32 = 0;
  flightsAt: i32 = 0;

  /** False (and an empty view) when p is not a whole board of this version. */
  open(p: usize, len: i32): bool {
    this.ptr = 0;
    this.len = 0;
    this.changeSeq = 0;
    this.routeSeq = 0;
    this.reportedStamp = 0;
    this.reportedCount = 0;
    this.vmCount = 0;
    this.sectionsAt = BOARD_FIXED;
    this.flightCount = 0;
    this.flightsAt = BOARD_FIXED;
    if (p === 0 || len < BOARD_FIXED) return false;
    if (load<u32>(p) !== BOARD_MAGIC || load<u16>(p, 4) !== BOARD_VERSION) return false;
    const reported = <i32>load<u16>(p, 32);
    const sectionsAt = BOARD_FIXED + reported * 6;
    if (sectionsAt > len) return false;
    // Every section must fit: a damaged value is no board at all (it is rewritten whole).
    const vms = <i32>load<u16>(p, 34);
    let at = sectionsAt;
    for (let i = 0; i < vms; i++) {
      if (at + VM_HEADER > len) return false;
      at += VM_HEADER + <i32>load<u16>(p + <usize>at, 2) * VM_ENTRY;
      if (at > len) return false;
    }
    this.ptr = p;
    this.len = len;
    this.changeSeq = load<u64>(p, 8);
    this.routeSeq = load<u64>(p, 16);
    this.reportedStamp = load<u64>(p, 24);
    this.reportedCount = reported;
    this.vmCount = vms;
    this.sectionsAt = sectionsAt;
    this.flightsAt = at;
    // Flight sections that do not fit are ignored, not the board: they only refine adapter costs.
    const flights = <i32>load<u16>(p, 36);
    let f = at;
    let whole = true;
    for (let i = 0; i < flights && whole; i++) {
      if (f + VM_HEADER > len) whole = false;
      else f += VM_HEADER + <i32>load<u16>(p + <usize>f, 2) * FLIGHT_ENTRY;
      if (f > len) whole = false;
    }
    this.flightCount = whole ? flights : 0;
    return true;
  }

  /** Change record n (a bucket index); valid for n in the last CHANGE_RING. */
  changeAt(n: u64): u32 {
    return load<u32>(this.ptr + <usize>(CHANGES_AT + <i32>(n % CHANGE_RING) * 4));
  }

  /** Route record n's address (24 bytes); valid for n in the last ROUTE_RING. */
  routeAt(n: u64): usize {
    return this.ptr + <usize>(ROUTES_AT + <i32>(n % ROUTE_RING) * ROUTE_BYTES);
  }

  /** Address of reported entry i (slot u16, requests u32). */
  reportedAt(i: i32): usize {
    return this.ptr + <usize>(BOARD_FIXED + i * 6);
  }
}

/** Thread, entry count and stamp of the section at offset `at` of the board at p. */
export function sectionThread(p: usize, at: i32): i32 {
  return <i32>load<u16>(p + <usize>at);
}
export function sectionCount(p: usize, at: i32): i32 {
  return <i32>load<u16>(p + <usize>at, 2);
}
export function sectionStamp(p: usize, at: i32): u64 {
  return load<u64>(p + <usize>at, 8);
}
/** Address of entry e of the section at offset `at`. */
export function sectionEntry(p: usize, at: i32, e: i32): usize {
  return p + <usize>(at + VM_HEADER + e * VM_ENTRY);
}
/** Offset of the section after the one at `at`. */
export function nextSection(p: usize, at: i32): i32 {
  return at + VM_HEADER + sectionCount(p, at) * VM_ENTRY;
}
/** Flight sections share the VM sections' header (sectionThread, sectionCount, sectionStamp). */
export function flightEntry(p: usize, at: i32, e: i32): usize {
  return p + <usize>(at + VM_HEADER + e * FLIGHT_ENTRY);
}
export function nextFlights(p: usize, at: i32): i32 {
  return at + VM_HEADER + sectionCount(p, at) * FLIGHT_ENTRY;
}

/** What one VM adds when it rewrites the board. */
export class BoardEdit {
  /** This VM's thread slot (-1: it publishes no section) and its stamp. */
  thread: i32 = -1;
  now: u64 = 0;
  /** Sections stamped before now - freshMs are dropped: their VM stopped writing. */
  freshMs: u64 = 0;
  queue: LocalQueue | null = null;
  /** Route records to append (ROUTE_BYTES each), oldest first. */
  routes: ByteBuf = new ByteBuf(ROUTE_BYTES * 16);
  /** Change records to append (u32 each), and whether so many changed that readers should drop everything. */
  changes: ByteBuf = new ByteBuf(64);
  changeFlood: bool = false;
  /** The leader's reported share to publish (null: keep the board's). */
  reported: ReportedMax | null = null;
  /** This VM's LoRA requests in flight: FLIGHT_ENTRY bytes each (slot u16, adapter u16, requests u32). */
  flights: ByteBuf = new ByteBuf(FLIGHT_ENTRY * 16);
  /** Set by writeBoard: where in its output the editor's own section's entries begin and end (-1: none). */
  entriesAt: i32 = -1;
  entriesEnd: i32 = -1;

  clearRecords(): void {
    this.routes.len = 0;
    this.changes.len = 0;
    this.changeFlood = false;
  }
}

/**
 * Writes into `out` the board `src` (src.ptr may be 0: a new board) with `edit` applied: the
 * records appended to the rings, the editor's section replaced, stale sections dropped, and the
 * reported share replaced when the edit carries one.
 */
export function writeBoard(src: BoardView, edit: BoardEdit, out: ByteBuf): void {
  const p = src.ptr;
  const q = edit.queue;
  const mine = edit.thread >= 0 && q !== null ? entriesOf(q) : 0;
  const flights = edit.thread >= 0 ? edit.flights.len / FLIGHT_ENTRY : 0;
  out.len = 0;
  out.reserve(
    src.len +
      BOARD_FIXED +
      VM_HEADER +
      mine * VM_ENTRY +
      VM_HEADER +
      flights * FLIGHT_ENTRY +
      (edit.reported !== null ? edit.reported!.slots * 6 : 0),
  );
  const o = out.ptr;
  if (p !== 0) memory.copy(o, p, <usize>BOARD_FIXED);
  else memory.fill(o, 0, <usize>BOARD_FIXED);
  store<u32>(o, BOARD_MAGIC);
  store<u16>(o, BOARD_VERSION, 4);
  store<u16>(o, 0, 6);
  appendChanges(o, edit);
  appendRoutes(o, edit);
  let at = BOARD_FIXED;
  // The reported share: the leader's new one, or the board's as it was.
  if (edit.reported !== null) {
    const r = edit.reported!;
    let n = 0;
    for (let s = 0; s < r.slots; s++) {
      const v = r.at(s);
      if (v === 0) continue;
      store<u16>(o + <usize>at, <u16>s);
      store<u32>(o + <usize>at, v, 2);
      at += 6;
      n++;
    }
    store<u64>(o, edit.now, 24);
    store<u16>(o, <u16>n, 32);
  } else if (p !== 0) {
    const bytes = src.reportedCount * 6;
    memory.copy(o + <usize>at, p + <usize>BOARD_FIXED, <usize>bytes);
    at += bytes;
  } else {
    store<u64>(o, 0, 24);
    store<u16>(o, 0, 32);
  }
  let vms = 0;
  let s = src.sectionsAt;
  for (let i = 0; i < src.vmCount; i++) {
    const next = nextSection(p, s);
    const t = sectionThread(p, s);
    if (t !== edit.thread && sectionStamp(p, s) + edit.freshMs >= edit.now) {
      memory.copy(o + <usize>at, p + <usize>s, <usize>(next - s));
      at += next - s;
      vms++;
    }
    s = next;
  }
  edit.entriesAt = -1;
  edit.entriesEnd = -1;
  if (edit.thread >= 0 && q !== null) {
    edit.entriesAt = at + VM_HEADER;
    at = writeSection(o, at, edit.thread, edit.now, q);
    edit.entriesEnd = at;
    vms++;
  }
  store<u16>(o, <u16>vms, 34);
  // The flight sections: the other fresh VMs' as they were, then this VM's (none when it has none).
  let fs = 0;
  let f = src.flightsAt;
  for (let i = 0; i < src.flightCount; i++) {
    const next = nextFlights(p, f);
    if (sectionThread(p, f) !== edit.thread && sectionStamp(p, f) + edit.freshMs >= edit.now) {
      memory.copy(o + <usize>at, p + <usize>f, <usize>(next - f));
      at += next - f;
      fs++;
    }
    f = next;
  }
  if (flights > 0 && flights <= 0xffff) {
    store<u16>(o + <usize>at, <u16>edit.thread);
    store<u16>(o + <usize>at, <u16>flights, 2);
    store<u32>(o + <usize>at, 0, 4);
    store<u64>(o + <usize>at, edit.now, 8);
    memory.copy(o + <usize>(at + VM_HEADER), edit.flights.ptr, <usize>(flights * FLIGHT_ENTRY));
    at += VM_HEADER + flights * FLIGHT_ENTRY;
    fs++;
  }
  store<u16>(o, <u16>fs, 36);
  store<u16>(o, 0, 38);
  out.len = at;
}

function appendChanges(o: usize, edit: BoardEdit): void {
  let seq = load<u64>(o, 8);
  if (edit.changeFlood) {
    // More than the ring holds: a jump past it tells every reader to drop all it cached.
    seq += CHANGE_RING + 1;
  } else {
    const n = edit.changes.len >> 2;
    for (let i = 0; i < n; i++) {
      store<u32>(
        o + <usize>(CHANGES_AT + <i32>(seq % CHANGE_RING) * 4),
        load<u32>(edit.changes.ptr + ((<usize>i) << 2)),
      );
      seq++;
    }
  }
  store<u64>(o, seq, 8);
}

function appendRoutes(o: usize, edit: BoardEdit): void {
  let seq = load<u64>(o, 16);
  const n = edit.routes.len / ROUTE_BYTES;
  for (let i = 0; i < n; i++) {
    memory.copy(
      o + <usize>(ROUTES_AT + <i32>(seq % ROUTE_RING) * ROUTE_BYTES),
      edit.routes.ptr + <usize>(i * ROUTE_BYTES),
      <usize>ROUTE_BYTES,
    );
    seq++;
  }
  store<u64>(o, seq, 16);
}

/**
 * The entries of a VM's section for `q` (VM_ENTRY bytes per slot with requests to publish, as
 * writeSection lays them out, without the header) into `out`: what other VMs read of this VM.
 */
export function sectionEntries(q: LocalQueue, out: ByteBuf): void {
  out.len = 0;
  out.reserve(entriesOf(q) * VM_ENTRY);
  out.len = writeEntries(out.ptr, 0, q);
}

/** Slots where the queue has requests to publish. */
function entriesOf(q: LocalQueue): i32 {
  let n = 0;
  for (let s = 0; s < q.ownSlots; s++) if (q.countAt(s) > 0 || q.unseenDecodingAt(s) > 0) n++;
  return n;
}

function writeSection(o: usize, at: i32, thread: i32, now: u64, q: LocalQueue): i32 {
  const head = at;
  const end = writeEntries(o, at + VM_HEADER, q);
  const n = (end - at - VM_HEADER) / VM_ENTRY;
  store<u16>(o + <usize>head, <u16>thread);
  store<u16>(o + <usize>head, <u16>n, 2);
  store<u32>(o + <usize>head, 0, 4);
  store<u64>(o + <usize>head, now, 8);
  return end;
}

/** Writes q's entries at o + at; returns the offset after the last. */
function writeEntries(o: usize, at: i32, q: LocalQueue): i32 {
  for (let s = 0; s < q.ownSlots; s++) {
    const pending = <u32>q.countAt(s);
    const decoding = q.unseenDecodingAt(s);
    if (pending === 0 && decoding === 0) continue;
    const e = o + <usize>at;
    const tokens = q.tokensAt(s);
    store<u16>(e, <u16>s);
    store<u32>(e, pending, 2);
    store<u32>(e, tokens < 4294967295 ? <u32>tokens : 4294967295, 6);
    store<u32>(e, q.unseenPendingAt(s), 10);
    store<u32>(e, decoding, 14);
    // Absolute, so the entry changes only when the queue does (wouldChange); mod 2^32 ms (49 days),
    // read back as an age from the reader's clock (entrySince).
    store<u32>(e, pending > 0 ? <u32>(<u64>q.sinceAt(s)) : 0, 18);
    at += VM_ENTRY;
  }
  return at;
}

/**
 * The `since` of VM entry e (writeEntries) read at `now`: its age on the low 32 bits of the ms
 * clock the VMs share (wrap-safe); a since a moment after the reader's clock (the writer read it
 * later) is now, not 49 days ago.
 */
export function entrySince(e: usize, now: u64): f64 {
  const age = <u32>now - load<u32>(e, 18);
  return age < 0x80000000 ? <f64>now - <f64>age : <f64>now;
}

/** Appends one route record to `out`. */
export function addRoute(out: ByteBuf, hash: u64, expiresMs: u64, depth: u32, slot: i32, kind: u16): void {
  out.reserve(ROUTE_BYTES);
  const e = out.ptr + <usize>out.len;
  store<u64>(e, hash);
  store<u64>(e, expiresMs, 8);
  store<u32>(e, depth, 16);
  store<u16>(e, <u16>slot, 20);
  store<u16>(e, kind, 22);
  out.len += ROUTE_BYTES;
}

/** Keeps only the newest ROUTE_RING records of `b` (older ones would be overwritten in the ring anyway). */
export function trimRoutes(b: ByteBuf): void {
  const max = <i32>ROUTE_RING * ROUTE_BYTES;
  if (b.len <= max) return;
  memory.copy(b.ptr, b.ptr + <usize>(b.len - max), <usize>max);
  b.len = max;
}
