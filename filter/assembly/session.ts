// Session affinity (filter/core/session-affinity.ts has the rule): the session's slot is looked up
// before the decision — this gateway's own table first (its VMs' requests of the session, which
// reach every VM through the board's route ring), then the fleet's the control plane publishes —
// and recorded after routing, in the gateway's table and in the leader's next report. A lookup
// reads shared data only for a fleet key this VM does not hold yet (fleet-sessions.ts).
import { ByteBuf } from "../core/byte-buf";
import { CfgImage } from "../core/cache-images";
import { addRoute, ROUTE_SESSION } from "../core/gateway-board";
import { RouteCells } from "../core/route-cells";
import { SESSION_KEPT, SESSION_MOVED, SESSION_NEW, sessionHash } from "../core/session-affinity";
import { FleetSessions } from "./fleet-sessions";
import { getHeader, REQUEST_HEADERS } from "./host";
import { stats } from "./metrics";

const SESSION_DEPTH: u32 = 0;

export class SessionTable {
  constructor(
    private cells: RouteCells,
    private fleet: FleetSessions,
    private records: ByteBuf,
  ) {}

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
    const local = this.cells.lookup(hash, SESSION_DEPTH, nowMs);
    const localExpiry = this.cells.expiry(hash, SESSION_DEPTH, nowMs);
    const fleet = this.fleet.lookup(hash, nowMs);
    return fleet >= 0 && this.fleet.expiry > localExpiry ? fleet : local;
  }

  /** Records that session `hash` now goes to `slot`, until `expiresMs`. */
  record(hash: u64, slot: i32, expiresMs: u64, nowMs: u64): void {
    this.cells.put(hash, SESSION_DEPTH, slot, expiresMs, nowMs);
    addRoute(this.records, hash, expiresMs, SESSION_DEPTH, slot, ROUTE_SESSION);
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
