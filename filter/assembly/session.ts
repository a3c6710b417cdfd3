// Session affinity in shared data (filter/core/session-affinity.ts has the layout and the rule):
// the session's slot is looked up before the decision — this gateway's own table first (fresher:
// its requests of the session), then the fleet's the control plane publishes — and recorded after
// routing, in the gateway's table and in the leader's next report. Best effort like the
// speculative routes: a lost CAS race skips the local write; the report still carries the route.
import { ByteBuf } from "../core/byte-buf";
import { CfgImage } from "../core/cache-images";
import {
  SESSION_KEPT,
  SESSION_MOVED,
  SESSION_NEW,
  sessionExpiry,
  sessionHash,
  sessionKey,
  sessionLookup,
  sessionUpdate,
} from "../core/session-affinity";
import { getHeader, getShared, OK, REQUEST_HEADERS, SharedValue, setShared } from "./host";
import { stats } from "./metrics";

const CAS_ATTEMPTS: i32 = 3;

export class SessionTable {
  private read: SharedValue = new SharedValue();
  private out: ByteBuf = new ByteBuf(256);
  /** Expiry of the last lookup's entry (0: none). */
  private expiry: u64 = 0;

  /**
   * The session hash of this request's session header (0: affinity off, no header, or an
   * unusable value — counted) — the header's bytes go no further than the hash.
   */
  hashOf(cfg: CfgImage): u64 {
    const name = cfg.sessionHeaderName;
    if (name.length === 0 || cfg.sessionTtlMs === 0) return 0;
    const v = getHeader(REQUEST_HEADERS, name);
    if (v === null) return 0;
    const h = sessionHash(changetype<usize>(v), v.byteLength);
    if (h === 0) stats.inc(stats.sessionInvalid);
    return h;
  }

  /**
   * The slot session `hash` last went to, or -1: of this gateway's record and the fleet's, the
   * one that expires last (the session's latest request, through whichever gateway).
   */
  find(hash: u64, nowMs: u64): i32 {
    const key = sessionKey(hash);
    const local = this.lookup(`kvr.ss.${key}`, hash, nowMs);
    const localExpiry = this.expiry;
    const fleet = this.lookup(`kvr.sc.${key}`, hash, nowMs);
    return fleet >= 0 && this.expiry > localExpiry ? fleet : local;
  }

  private lookup(key: string, hash: u64, nowMs: u64): i32 {
    this.expiry = 0;
    getShared(key, this.read);
    const v = this.read.value;
    if (v === null) return -1;
    const p = changetype<usize>(v);
    this.expiry = sessionExpiry(p, v.byteLength, hash, nowMs);
    return sessionLookup(p, v.byteLength, hash, nowMs);
  }

  /** Records that session `hash` now goes to `slot`, until `expiresMs`. */
  record(hash: u64, slot: i32, expiresMs: u64, nowMs: u64): void {
    const key = `kvr.ss.${sessionKey(hash)}`;
    const r = this.read;
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      getShared(key, r);
      const v = r.value;
      sessionUpdate(
        v === null ? 0 : changetype<usize>(v),
        v === null ? 0 : v.byteLength,
        hash,
        slot,
        expiresMs,
        nowMs,
        this.out,
      );
      if (setShared(key, this.out.ptr, this.out.len, v === null ? 0 : r.cas) === OK) break;
    }
  }
}

/** The outcome of a session whose remembered slot was `remembered` (-1: none) and went to `slot`; counted. */
export function sessionOutcome(remembered: i32, slot: i32): u8 {
  if (remembered < 0) {
    stats.inc(stats.sessionNew);
    return SESSION_NEW;
  }
  if (remembered === slot) {
    stats.inc(stats.sessionKept);
    return SESSION_KEPT;
  }
  stats.inc(stats.sessionMoved);
  return SESSION_MOVED;
}

export const sessions = new SessionTable();
