// KV events between replicas that shard pools (pool-shards.ts). The owner of a pool is the only
// replica subscribed to its engines; what it applies of their streams — each batch's engine
// payload, after its own sequencing, replay and restart handling (events/rank-ingest.ts), and
// each reset of a slot — it relays on `<prefix>.kv`. Its peers apply the relays of the pools
// they do not own to their own index, so every replica still serves every gateway every pool.
// Raw engine batches travel, not index rows: the relayed unit is the engines' own format, which
// the receiving index reads through the same path as a subscription's (one path), and it does
// not change when the image format does.
//
// NATS core delivers at most once. A peer numbers each owner's relays per pool: a skipped number
// is a lost batch (a chain whose stored parent was lost stays unindexed), so the pool's slots
// are cleared there and refill from the next batches, as an engine gap nobody can replay does.
import type {
  BatchMeta,
  EventSink,
  KvEvent,
  RankResetReason,
  ScannedBatch,
} from "../vocabulary/kv-events.ts";
import type { RelayedEvents } from "./replica-codec.ts";

/** The relay as the owner sends it; the exchange adds the sender's id and epoch. */
export type OutgoingRelay = Omit<RelayedEvents, "replica" | "epoch">;

export interface RelayingSinkOptions {
  /** The pool of a slot key (null: not a slot of ours). */
  poolOf: (slotKey: string) => string | null;
  owns: (pool: string) => boolean;
  send: (relay: OutgoingRelay) => void;
}

/** The owner's side: applies to `inner` (the index) and relays what was applied. */
export class RelayingSink implements EventSink {
  readonly #seq = new Map<string, bigint>();
  /** The batch read last and not relayed yet (its first applied event, or its whole application, relays it). */
  #pending: { slotKey: string; payload: Uint8Array } | null = null;
  relayed = 0;

  constructor(
    private readonly inner: EventSink,
    private readonly o: RelayingSinkOptions,
  ) {}

  scanBatch(slotKey: string, payload: Uint8Array): ScannedBatch | null {
    // Always defined, so that every batch's payload passes here before it is applied either way.
    this.#pending = { slotKey, payload };
    return this.inner.scanBatch?.(slotKey, payload) ?? null;
  }

  applyScanned(slotKey: string): void {
    this.inner.applyScanned?.(slotKey);
    this.#relayPending(slotKey);
  }

  event(slotKey: string, event: KvEvent, meta: BatchMeta): void {
    this.inner.event(slotKey, event, meta);
    this.#relayPending(slotKey);
  }

  rankReset(slotKey: string, reason: RankResetReason): void {
    this.inner.rankReset(slotKey, reason);
    this.#relay(slotKey, "reset", new Uint8Array(0));
  }

  #relayPending(slotKey: string): void {
    const p = this.#pending;
    if (p === null || p.slotKey !== slotKey) return;
    this.#pending = null;
    this.#relay(slotKey, "batch", p.payload);
  }

  #relay(slotKey: string, kind: OutgoingRelay["kind"], payload: Uint8Array): void {
    const pool = this.o.poolOf(slotKey);
    // A subscription of a pool just handed over may deliver a last batch: its new owner relays.
    if (pool === null || !this.o.owns(pool)) return;
    const seq = this.#seq.get(pool) ?? 0n;
    this.#seq.set(pool, seq + 1n);
    this.o.send({ pool, seq, slotKey, kind, payload });
    this.relayed++;
  }
}

export interface RelayApplierOptions {
  self: string;
  /** The owner of a pool in this replica's view (null: no such pool). */
  ownerOf: (pool: string) => string | null;
  poolOf: (slotKey: string) => string | null;
  /** The slot keys of a pool, to clear them all after a lost relay. */
  slotsOf: (pool: string) => readonly string[];
  /** Applies one engine batch payload to the index (events/relayed-batch.ts); false: undecodable. */
  apply: (slotKey: string, payload: Uint8Array) => boolean;
  /** Clears a slot in the index. */
  reset: (slotKey: string) => void;
}

export interface RelayApplierStats {
  batches: number;
  resets: number;
  /** Relays found missing (a skipped number): the pool's slots were cleared. */
  gaps: number;
  /** Relays not applied, by reason (not_owner, wrong_pool, undecodable). */
  dropped: Record<string, number>;
}

/** The peers' side: applies the relays of each pool's owner, in order, and notices lost ones. */
export class RelayApplier {
  readonly stats: RelayApplierStats = { batches: 0, resets: 0, gaps: 0, dropped: {} };
  readonly #streams = new Map<string, { replica: string; epoch: bigint; next: bigint }>();

  constructor(private readonly o: RelayApplierOptions) {}

  receive(m: RelayedEvents): void {
    const owner = this.o.ownerOf(m.pool);
    // Ours (a peer still catching up on who owns what) or not its sender's in our view: the owner's relays come.
    if (owner !== m.replica || owner === this.o.self) {
      this.#drop("not_owner");
      return;
    }
    if (this.o.poolOf(m.slotKey) !== m.pool) {
      this.#drop("wrong_pool");
      return;
    }
    const stream = this.#streams.get(m.pool);
    if (stream === undefined || stream.replica !== m.replica || stream.epoch !== m.epoch) {
      // A new owner (a handover) or the owner restarted: its numbers start here.
      this.#streams.set(m.pool, { replica: m.replica, epoch: m.epoch, next: m.seq + 1n });
    } else {
      if (m.seq !== stream.next) {
        this.stats.gaps++;
        for (const slotKey of this.o.slotsOf(m.pool)) this.o.reset(slotKey);
      }
      stream.next = m.seq + 1n;
    }
    if (m.kind === "reset") {
      this.o.reset(m.slotKey);
      this.stats.resets++;
    } else if (this.o.apply(m.slotKey, m.payload)) {
      this.stats.batches++;
    } else {
      this.#drop("undecodable");
    }
  }

  #drop(reason: string): void {
    this.stats.dropped[reason] = (this.stats.dropped[reason] ?? 0) + 1;
  }
}
