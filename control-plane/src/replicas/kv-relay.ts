// KV events between replicas that shard pools (pool-shards.ts). The owner of a pool is the only
// replica subscribed to its engines; what it applies of their streams — each batch's engine
// payload, after its own sequencing, replay and restart handling (events/rank-ingest.ts), and
// each reset of a slot — it relays on `<prefix>.kv`. Its peers apply the relays of the pools
// they do not own to their own index, so every replica still serves every gateway every pool.
// Raw engine batches travel, not index rows: the relayed unit is the engines' own format, which
// the receiving index reads through the same path as a subscription's (one path), and it does
// not change when the image format does.
//
// A peer applies the relays of the pools it does not own from their owner in its view — and from
// any sender while that owner has gone quiet: replicas notice a peer's silence on their own
// clocks, so the new owner of a lost replica's pools may relay (its catch-up replay first)
// before another survivor names it owner, and refusing those would lose exactly the batches
// that rebuild the pool. While the owner is heard, another sender's relays are refused: a
// replica that has just started owns every pool until it hears its peers, and its catch-up
// replays of pools that are not its own would land among the owner's live batches, out of
// order. Two senders accepted for one pool relay the same engine stream, each in order: stores
// repeated are recognised by the index, and each copy ends in the engine's state.
//
// NATS core delivers at most once. A peer numbers each sender's relays per pool: a skipped number
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
  /** Whether this replica owns the pool now (then it applies its own subscriptions, not relays). */
  owns: (pool: string) => boolean;
  /** Whether `sender`'s relays of `pool` apply: it is the pool's owner here, or that owner has gone quiet. */
  accepts: (pool: string, sender: string) => boolean;
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
  /** Relays not applied, by reason (own_pool, not_owner, wrong_pool, undecodable). */
  dropped: Record<string, number>;
}

/** (pool, sender) streams whose numbers a peer follows at most. */
export const MAX_RELAY_STREAMS = 4096;

/** The peers' side: applies the relays of the pools it does not own, in order, and notices lost ones. */
export class RelayApplier {
  readonly stats: RelayApplierStats = { batches: 0, resets: 0, gaps: 0, dropped: {} };
  /** Per pool and sender: the sender's epoch and the number its next relay should carry. */
  readonly #streams = new Map<string, { epoch: bigint; next: bigint }>();

  constructor(private readonly o: RelayApplierOptions) {}

  receive(m: RelayedEvents): void {
    // Ours now: our own subscription feeds it (a sender that has not noticed the handover yet).
    if (this.o.owns(m.pool)) {
      this.#drop("own_pool");
      return;
    }
    if (!this.o.accepts(m.pool, m.replica)) {
      this.#drop("not_owner");
      return;
    }
    if (this.o.poolOf(m.slotKey) !== m.pool) {
      this.#drop("wrong_pool");
      return;
    }
    const key = `${m.pool}\0${m.replica}`;
    const stream = this.#streams.get(key);
    // Senders come and go (every handover adds one): past the bound every stream starts over,
    // which can miss one gap per stream, never apply anything twice.
    if (stream === undefined && this.#streams.size >= MAX_RELAY_STREAMS) this.#streams.clear();
    if (stream === undefined || stream.epoch !== m.epoch) {
      // A new sender (a handover) or the sender restarted: its numbers start here.
      this.#streams.set(key, { epoch: m.epoch, next: m.seq + 1n });
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
