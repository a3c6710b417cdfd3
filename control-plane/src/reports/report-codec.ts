// The binary body of POST /v1/report (docs/wire-format.md §6), sent by each gateway's
// leader. Decoding is strict and bounded: a malformed report is refused whole with a reason,
// never half-applied.
import { ByteReader } from "../common/byte-reader.ts";
import { ByteWriter } from "../common/byte-writer.ts";

export const REPORT_MAGIC = 0x5252564b; // "KVRR" read as a little-endian u32
/**
 * Protocol 2 adds the served cached tokens to finished entries; protocol 3 adds session entries
 * at the end (filters send it only when a report has sessions). Protocols 1 and 2 are still read.
 */
export const REPORT_PROTOCOL = 3;
const OLDEST_PROTOCOL = 1;

/** Finished-entry flags (protocol 2): what the engine's answer said about its cache. */
export const SERVED_USAGE = 1;
export const SERVED_CACHED = 2;
export const SERVED_CUT = 4;
/** The gateway did not read the answer (a stream outside its sample): neither known nor unknown. */
export const SERVED_UNREAD = 8;

export interface FinishedRequest {
  slot: number;
  /** HTTP status the client got; 0 = the upstream connection failed (reset, refused, timeout). */
  status: number;
  /** Outcome code of the routing decision (wire-format §6). */
  outcome: number;
  /** The request's priority level: 0 standard, 1 sheddable, 2 critical (older gateways: 0). */
  priority?: number;
  promptBytes: number;
  /** Prompt bytes the gateway predicted cached on the chosen slot (chunks × chunk size). */
  cachedBytes: number;
  /**
   * What the engine's answer said: SERVED_* bits (0 = nothing; protocol 1 reports are 0). Absent
   * is 0.
   */
  servedFlags?: number;
  /** The engine's `usage.prompt_tokens_details.cached_tokens`, with SERVED_CACHED. */
  servedCachedTokens?: number;
  ttftMs: number;
  durationMs: number;
  requestId: string;
}

export interface SpeculativeRoute {
  slot: number;
  depth: number;
  hash: bigint;
  ttlMs: number;
}

/** What the gateway did with a request's session (filter/core/session-affinity.ts SESSION_*). */
export const SESSION_NEW = 0;
export const SESSION_KEPT = 1;
export const SESSION_MOVED = 2;

export interface SessionRoute {
  /** The cache slot the session's request went to. */
  slot: number;
  /** SESSION_NEW, SESSION_KEPT or SESSION_MOVED. */
  outcome: number;
  /** XXH64 of the session id (the gateway never reports the id itself). */
  hash: bigint;
  /** When the gateway forgets the session (ms since the epoch, its clock): its last request + sessionTtlMs. */
  expiresMs: bigint;
}

export interface Report {
  gateway: string;
  /** The gateway's current in-flight requests per slot (replaces its previous report). */
  inflight: Map<number, number>;
  finished: FinishedRequest[];
  speculative: SpeculativeRoute[];
  /** Session routes (protocol 3; absent or empty before). */
  sessions?: SessionRoute[];
}

export class ReportDecodeError extends Error {}

/** The slot of a finished request the gateway answered without routing it (wire-format §6). */
export const NO_SLOT = 0xffff;

/**
 * A slot id that names no slot here: what a peer replica's slot maps to when this replica does not
 * know that slot (control-plane/src/replicas/). Never on the wire (not a u16); applyReport skips
 * entries that name it.
 */
export const UNKNOWN_SLOT = -1;

/**
 * Turns a slot id as the report's author numbered it into this replica's id (UNKNOWN_SLOT when
 * there is none; NO_SLOT stays NO_SLOT). Every slot field is read through it, so a report relayed by another replica,
 * whose slot table may number the same (endpoint, rank) differently, decodes into our ids.
 */
export type SlotMapper = (slot: number) => number;
const sameSlot: SlotMapper = (slot) => slot;

/** The report's reader: every slot field goes through the mapper. */
class Reader extends ByteReader {
  constructor(
    bytes: Uint8Array,
    private readonly mapSlot: SlotMapper,
  ) {
    super(bytes, "report", (message) => new ReportDecodeError(message));
  }
  /** A slot id (u16), in this replica's numbering. */
  slot(what: string): number {
    return this.mapSlot(this.u16(what));
  }
}

/** Decodes a report; `mapSlot` renumbers its slots (a peer replica's report, replicas/). */
export function decodeReport(bytes: Uint8Array, mapSlot: SlotMapper = sameSlot): Report {
  const r = new Reader(bytes, mapSlot);
  if (r.u32("magic") !== REPORT_MAGIC) throw new ReportDecodeError("not a kvroute report (bad magic)");
  const protocol = r.u16("protocol");
  if (protocol < OLDEST_PROTOCOL || protocol > REPORT_PROTOCOL)
    throw new ReportDecodeError(`unsupported report protocol ${protocol}`);
  r.u16("reserved");
  const gateway = r.str16("gateway id");
  const inflight = new Map<number, number>();
  for (let i = 0, n = r.count("inflight"); i < n; i++)
    inflight.set(r.slot("inflight slot"), r.u32("inflight count"));
  const finished: FinishedRequest[] = [];
  for (let i = 0, n = r.count("finished"); i < n; i++) {
    const slot = r.slot("finished slot");
    const status = r.u16("finished status");
    const outcome = r.u8("finished outcome");
    // Protocol 1: a reserved byte, and no served tokens.
    const flags = r.u8(protocol === 1 ? "finished reserved" : "finished served flags");
    const promptBytes = r.u32("prompt bytes");
    const cachedBytes = r.u32("cached bytes");
    const ttftMs = r.u32("ttft");
    const durationMs = r.u32("duration");
    const served = protocol === 1 ? 0 : r.u32("served cached tokens");
    // Protocol 1 has no priority: standard.
    const priority = protocol === 1 ? 0 : r.u8("finished priority");
    const f: FinishedRequest = {
      slot,
      status,
      outcome,
      priority,
      promptBytes,
      cachedBytes,
      ttftMs,
      durationMs,
      requestId: r.str16("request id"),
    };
    if (protocol >= 2) {
      f.servedFlags = flags & (SERVED_USAGE | SERVED_CACHED | SERVED_CUT | SERVED_UNREAD);
      if ((flags & SERVED_CACHED) !== 0) f.servedCachedTokens = served;
    }
    finished.push(f);
  }
  const speculative: SpeculativeRoute[] = [];
  for (let i = 0, n = r.count("speculative"); i < n; i++) {
    speculative.push({
      slot: r.slot("speculative slot"),
      depth: r.u32("speculative depth"),
      hash: r.u64("speculative hash"),
      ttlMs: r.u32("speculative ttl"),
    });
  }
  const sessions: SessionRoute[] = [];
  if (protocol >= 3) {
    for (let i = 0, n = r.count("sessions"); i < n; i++) {
      sessions.push({
        slot: r.slot("session slot"),
        outcome: r.u8("session outcome"),
        hash: r.u64("session hash"),
        expiresMs: r.u64("session expiry"),
      });
    }
  }
  r.end();
  return { gateway, inflight, finished, speculative, sessions };
}

/** The flags of an entry: SERVED_CACHED exactly when it carries served tokens. */
function servedFlags(f: FinishedRequest): number {
  const flags = (f.servedFlags ?? 0) & (SERVED_USAGE | SERVED_CUT | SERVED_UNREAD);
  return f.servedCachedTokens === undefined ? flags : flags | SERVED_CACHED | SERVED_USAGE;
}

/** Encoder (the filter has its own in AssemblyScript); used by tests and Node-side tools. */
export function encodeReport(report: Report): Uint8Array {
  const w = new ByteWriter().u32(REPORT_MAGIC).u16(REPORT_PROTOCOL).u16(0).str16(report.gateway);
  w.u32(report.inflight.size);
  for (const [slot, n] of report.inflight) w.u16(slot).u32(n);
  w.u32(report.finished.length);
  for (const f of report.finished) {
    w.u16(f.slot)
      .u16(f.status)
      .u8(f.outcome)
      .u8(servedFlags(f))
      .u32(f.promptBytes)
      .u32(f.cachedBytes)
      .u32(f.ttftMs)
      .u32(f.durationMs)
      .u32(f.servedCachedTokens ?? 0)
      .u8(f.priority ?? 0);
    w.str16(f.requestId);
  }
  w.u32(report.speculative.length);
  for (const s of report.speculative) w.u16(s.slot).u32(s.depth).u64(s.hash).u32(s.ttlMs);
  const sessions = report.sessions ?? [];
  w.u32(sessions.length);
  for (const s of sessions) w.u16(s.slot).u8(s.outcome).u64(s.hash).u64(s.expiresMs);
  return w.finish();
}
