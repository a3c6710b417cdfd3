// What each peer replica's slot ids mean here. Replicas number slots in the order they found
// them (discovery and `ranks: auto` scrapes answer in any order), so a peer's slot 3 may be our
// slot 5: its announced slot table (id → `<pool>/<address>#<rank>`) is turned into a lookup of
// our ids, rebuilt when either table grows. Ids are never reused within an epoch, so a table only
// grows until its replica restarts (a new epoch, a new table).

import type { SlotTable } from "../model/slot-table.ts";
import { NO_SLOT, type SlotMapper, UNKNOWN_SLOT } from "../reports/report-codec.ts";
import type { SlotTableAnnouncement } from "./replica-codec.ts";

/** More peers than any deployment runs: a flood of made-up replica ids cannot grow the map. */
export const MAX_PEERS = 256;

interface Peer {
  epoch: bigint;
  keys: string[];
  shardsPools: boolean;
  lastSeenMs: number;
  /** Peer id → our id, and how many of our slots existed when it was built. */
  ours: Int32Array | null;
  oursBuiltAt: number;
}

export interface PeerView {
  replica: string;
  epoch: string;
  slots: number;
  /** It shards pools (`nats.shardPools`): it may be given pools. */
  shardsPools: boolean;
  lastSeenMs: number;
}

export class PeerSlotTables {
  readonly #peers = new Map<string, Peer>();

  constructor(private readonly slots: SlotTable) {}

  /** A peer's announcement; false when it was refused (too many peers). True for a new peer too. */
  learn(t: SlotTableAnnouncement, nowMs: number): "new" | "known" | "refused" {
    const known = this.#peers.get(t.replica);
    if (known === undefined && this.#peers.size >= MAX_PEERS) return "refused";
    this.#peers.set(t.replica, {
      epoch: t.epoch,
      keys: t.keys,
      shardsPools: t.shardsPools === true,
      lastSeenMs: nowMs,
      ours: null,
      oursBuiltAt: 0,
    });
    return known === undefined ? "new" : "known";
  }

  /**
   * How to read a report the peer relayed in `epoch`, or null while its table for that epoch is
   * not known (its announcement is still on the way: the report is dropped, a later one applies).
   */
  mapperFor(replica: string, epoch: bigint, nowMs: number): SlotMapper | null {
    const p = this.#peers.get(replica);
    if (p === undefined || p.epoch !== epoch) return null;
    p.lastSeenMs = nowMs;
    const ourCount = this.slots.all().length;
    if (p.ours === null || p.oursBuiltAt !== ourCount) {
      p.ours = Int32Array.from(p.keys, (k) => this.slots.byKey(k)?.id ?? UNKNOWN_SLOT);
      p.oursBuiltAt = ourCount;
    }
    const ours = p.ours;
    return (slot) =>
      slot === NO_SLOT ? NO_SLOT : slot < ours.length ? (ours[slot] as number) : UNKNOWN_SLOT;
  }

  /** How long `replica` has been silent (Infinity: never heard, or forgotten). */
  silentMs(replica: string, nowMs: number): number {
    const p = this.#peers.get(replica);
    return p === undefined ? Number.POSITIVE_INFINITY : nowMs - p.lastSeenMs;
  }

  /** Forgets peers silent for longer than `maxAgeMs` (stopped, partitioned); lists the rest. */
  live(nowMs: number, maxAgeMs: number): PeerView[] {
    for (const [id, p] of this.#peers) if (nowMs - p.lastSeenMs > maxAgeMs) this.#peers.delete(id);
    return [...this.#peers].map(([replica, p]) => ({
      replica,
      epoch: p.epoch.toString(),
      slots: p.keys.length,
      shardsPools: p.shardsPools,
      lastSeenMs: p.lastSeenMs,
    }));
  }
}
