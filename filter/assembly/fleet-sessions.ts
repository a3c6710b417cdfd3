// The fleet's sessions the control plane publishes (`kvr.sc.<j>`, docs/wire-format.md §4.6): read
// for a request that carries a session — the one shared-data read such a request makes besides the
// board (sessions are opt-in, and a fleet entry must be seen as soon as the sync wrote it).
import { sessionExpiry, sessionKey, sessionLookup } from "../core/session-affinity";
import { getShared, SharedValue } from "./host";

export class FleetSessions {
  private read: SharedValue = new SharedValue();
  /** Expiry of the last lookup's entry (0: none). */
  expiry: u64 = 0;

  /** The slot the fleet's table names for `hash`, or -1; its expiry in `expiry`. */
  lookup(hash: u64, nowMs: u64): i32 {
    getShared(`kvr.sc.${sessionKey(hash)}`, this.read);
    this.expiry = 0;
    const v = this.read.value;
    if (v === null) return -1;
    const p = changetype<usize>(v);
    this.expiry = sessionExpiry(p, v.byteLength, hash, nowMs);
    return sessionLookup(p, v.byteLength, hash, nowMs);
  }
}
