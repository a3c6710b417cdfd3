// Builds the body of POST /v1/report (docs/wire-format.md §6) and the per-request records stream
// contexts hand to the leader. A thread collects its records and enqueues them as one batch (the
// records back to back; each record's length follows from its own header).
import { ByteBuf } from "./byte-buf";

export const REPORT_MAGIC: u32 = 0x5252564b; // "KVRR"
/** Report protocol 2: finished entries carry the served cached tokens and the request's priority (docs/wire-format.md §6). */
export const REPORT_PROTOCOL: u16 = 2;
/**
 * Report protocol 3: protocol 2 plus the session entries at the end. Sent only when a report has
 * sessions — which a control plane asks for (kvr.cfg protocol 3) only once it reads protocol 3.
 */
export const REPORT_PROTOCOL_SESSIONS: u16 = 3;
/** A protocol-1 finished record, from a VM of an older module still draining into the queue. */
export const QUEUE_FINISHED_V1: u8 = 1;
export const QUEUE_SPECULATIVE: u8 = 2;
/** A finished record: the §6 protocol-2 entry. */
export const QUEUE_FINISHED: u8 = 3;
/**
 * A session's route: type, slot u16, outcome u8 (session-affinity.ts SESSION_*), session hash u64,
 * expiry u64 (ms, the gateway's clock: its last request + sessionTtlMs).
 */
export const QUEUE_SESSION: u8 = 4;
const SESSION_RECORD: i32 = 20;
const SESSION_ENTRY: i32 = 19;

/** Fixed bytes of a finished queue record before its request id (type byte included). */
const FINISHED_FIXED: i32 = 30;
const FINISHED_V1_FIXED: i32 = 25;

/**
 * One finished request as a queue message: type byte + the record's wire layout. `served` holds
 * the response scan's SERVED_* flags (usage-scan.ts) and `servedTokens` the engine's cached
 * tokens when SERVED_CACHED is set; `priority` the request's level (priority.ts).
 */
export function writeFinished(
  out: ByteBuf,
  slot: i32,
  status: u32,
  outcome: u32,
  priority: u32,
  promptBytes: u32,
  cachedBytes: u32,
  ttftMs: u32,
  durationMs: u32,
  served: u8,
  servedTokens: u32,
  requestId: usize,
  requestIdLen: i32,
): void {
  const idLen = requestIdLen > 128 ? 128 : requestIdLen < 0 ? 0 : requestIdLen;
  out.len = 0;
  out.reserve(FINISHED_FIXED + idLen);
  const p = out.ptr;
  store<u8>(p, QUEUE_FINISHED);
  store<u16>(p + 1, <u16>(slot < 0 ? 0xffff : slot));
  store<u16>(p + 3, <u16>status);
  store<u8>(p + 5, <u8>outcome);
  store<u8>(p + 6, served);
  store<u32>(p + 7, promptBytes);
  store<u32>(p + 11, cachedBytes);
  store<u32>(p + 15, ttftMs);
  store<u32>(p + 19, durationMs);
  store<u32>(p + 23, (served & 2) !== 0 ? servedTokens : 0);
  store<u8>(p + 27, <u8>priority);
  store<u16>(p + 28, <u16>idLen);
  memory.copy(p + 30, requestId, <usize>idLen);
  out.len = FINISHED_FIXED + idLen;
}

/**
 * A routed prompt's speculative routes as one queue message: type, slot u16, TTL u32, count u16,
 * then `count` chunk hashes u64 (depths 1…count). One enqueue per request, however long the
 * prompt; the leader expands it into per-chunk report entries.
 */
export function writeSpeculative(out: ByteBuf, slot: i32, hashes: usize, count: i32, ttlMs: u32): void {
  const n = count > 0xffff ? 0xffff : count;
  out.len = 0;
  out.reserve(9 + n * 8);
  const p = out.ptr;
  store<u8>(p, QUEUE_SPECULATIVE);
  store<u16>(p + 1, <u16>slot);
  store<u32>(p + 3, ttlMs);
  store<u16>(p + 7, <u16>n);
  memory.copy(p + 9, hashes, <usize>(n * 8));
  out.len = 9 + n * 8;
}

/** A session's route as a queue message (the session hash only: ids are never reported). */
export function writeSession(out: ByteBuf, slot: i32, outcome: u8, hash: u64, expiresMs: u64): void {
  out.len = 0;
  out.reserve(SESSION_RECORD);
  const p = out.ptr;
  store<u8>(p, QUEUE_SESSION);
  store<u16>(p + 1, <u16>slot);
  store<u8>(p + 3, outcome);
  store<u64>(p + 4, hash);
  store<u64>(p + 12, expiresMs);
  out.len = SESSION_RECORD;
}

/** Accumulates one report from queue messages and in-flight counts. */
export class ReportWriter {
  private finished: ByteBuf = new ByteBuf(4096);
  private speculative: ByteBuf = new ByteBuf(1024);
  private inflight: ByteBuf = new ByteBuf(256);
  private sessions: ByteBuf = new ByteBuf(256);
  finishedCount: u32 = 0;
  sessionCount: u32 = 0;
  speculativeCount: u32 = 0;
  inflightCount: u32 = 0;
  readonly out: ByteBuf = new ByteBuf(4096);

  reset(): void {
    this.finished.len = 0;
    this.speculative.len = 0;
    this.inflight.len = 0;
    this.sessions.len = 0;
    this.sessionCount = 0;
    this.finishedCount = 0;
    this.speculativeCount = 0;
    this.inflightCount = 0;
  }

  /** Takes one queue message; false for a message of unknown shape (dropped). */
  addMessage(p: usize, len: i32): bool {
    if (len < 1) return false;
    const type = load<u8>(p);
    if (type === QUEUE_FINISHED && len >= FINISHED_FIXED) {
      const idLen = <i32>load<u16>(p + 28);
      if (len !== FINISHED_FIXED + idLen) return false;
      this.finished.append(p + 1, len - 1);
      this.finishedCount++;
      return true;
    }
    if (type === QUEUE_FINISHED_V1 && len >= FINISHED_V1_FIXED) {
      // Served unknown, priority standard: the protocol-2 entry with flags 0, served tokens 0 and
      // priority 0 (a protocol-1 record has no priority; its reserved byte is dropped).
      const idLen = <i32>load<u16>(p + 23);
      if (len !== FINISHED_V1_FIXED + idLen) return false;
      const f = this.finished;
      f.reserve(len + 5);
      const at = f.ptr + <usize>f.len;
      memory.copy(at, p + 1, 22);
      store<u8>(at + 5, 0);
      store<u32>(at + 22, 0);
      store<u8>(at + 26, 0);
      memory.copy(at + 27, p + 23, <usize>(2 + idLen));
      f.len += len + 4;
      this.finishedCount++;
      return true;
    }
    if (type === QUEUE_SPECULATIVE && len >= 9) {
      const n = <i32>load<u16>(p + 7);
      if (len !== 9 + n * 8) return false;
      const slot = load<u16>(p + 1);
      const ttl = load<u32>(p + 3);
      const s = this.speculative;
      s.reserve(n * 18);
      for (let i = 0; i < n; i++) {
        const at = s.ptr + <usize>s.len;
        store<u16>(at, slot);
        store<u32>(at + 2, <u32>(i + 1));
        store<u64>(at + 6, load<u64>(p + 9 + <usize>(i * 8)));
        store<u32>(at + 14, ttl);
        s.len += 18;
      }
      this.speculativeCount += <u32>n;
      return true;
    }
    if (type === QUEUE_SESSION && len === SESSION_RECORD) {
      this.sessions.append(p + 1, SESSION_ENTRY);
      this.sessionCount++;
      return true;
    }
    return false;
  }

  /** Takes a batch of records; false when a record is malformed (the rest of the batch is dropped). */
  addBatch(p: usize, len: i32): bool {
    let at = 0;
    while (at < len) {
      const n = recordLength(p + <usize>at, len - at);
      if (n <= 0 || !this.addMessage(p + <usize>at, n)) return false;
      at += n;
    }
    return true;
  }

  /** Bytes of records taken so far (finished + expanded speculative entries). */
  get recordBytes(): i32 {
    return this.finished.len + this.speculative.len + this.sessions.len;
  }

  addInflight(slot: i32, n: u32): void {
    if (n === 0) return;
    this.inflight.reserve(6);
    store<u16>(this.inflight.ptr + <usize>this.inflight.len, <u16>slot);
    store<u32>(this.inflight.ptr + <usize>this.inflight.len + 2, n);
    this.inflight.len += 6;
    this.inflightCount++;
  }

  get hasNews(): bool {
    return this.finishedCount > 0 || this.speculativeCount > 0 || this.sessionCount > 0;
  }

  /** The report body in `out`. */
  finish(gateway: string): void {
    const id = String.UTF8.encode(gateway);
    const idLen = id.byteLength > 0xffff ? 0xffff : id.byteLength;
    const o = this.out;
    o.len = 0;
    const sessions = this.sessionCount > 0;
    o.reserve(
      8 + 2 + idLen + 16 + this.inflight.len + this.finished.len + this.speculative.len + this.sessions.len,
    );
    store<u32>(o.ptr, REPORT_MAGIC);
    store<u16>(o.ptr + 4, sessions ? REPORT_PROTOCOL_SESSIONS : REPORT_PROTOCOL);
    store<u16>(o.ptr + 6, 0);
    store<u16>(o.ptr + 8, <u16>idLen);
    o.len = 10;
    o.append(changetype<usize>(id), idLen);
    o.appendI32(<i32>this.inflightCount);
    o.append(this.inflight.ptr, this.inflight.len);
    o.appendI32(<i32>this.finishedCount);
    o.append(this.finished.ptr, this.finished.len);
    o.appendI32(<i32>this.speculativeCount);
    o.append(this.speculative.ptr, this.speculative.len);
    if (!sessions) return;
    o.appendI32(<i32>this.sessionCount);
    o.append(this.sessions.ptr, this.sessions.len);
  }
}

/** Length of the record at p (type byte included), or 0 when it is cut or of unknown type. */
export function recordLength(p: usize, avail: i32): i32 {
  if (avail < 1) return 0;
  const type = load<u8>(p);
  let n = 0;
  if (type === QUEUE_FINISHED && avail >= FINISHED_FIXED) n = FINISHED_FIXED + <i32>load<u16>(p + 28);
  else if (type === QUEUE_FINISHED_V1 && avail >= FINISHED_V1_FIXED)
    n = FINISHED_V1_FIXED + <i32>load<u16>(p + 23);
  else if (type === QUEUE_SPECULATIVE && avail >= 9) n = 9 + 8 * <i32>load<u16>(p + 7);
  else if (type === QUEUE_SESSION) n = SESSION_RECORD;
  return n <= avail ? n : 0;
}
