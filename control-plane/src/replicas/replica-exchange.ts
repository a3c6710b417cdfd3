// Replicas share what gateways report, over NATS core pub/sub (DESIGN §7): every report a gateway
// posts here is relayed whole on `<prefix>.reports`, and every peer's relayed report is applied
// as if its gateway were attached here too. The model is keyed by gateway id, so a gateway that
// moves from one replica to another is counted once, and a peer's gateways expire like ours when
// their reports stop (publish/publisher.ts GATEWAY_SILENCE_MS). Each replica announces its slot
// table on `<prefix>.slots` (peer-slots.ts says why). Nothing waits on NATS: while it is down,
// nothing is sent or queued, and each replica routes on its own view. A message larger than the
// server's max_payload goes as parts and is joined by each peer (message-parts.ts).
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { connect, credsAuthenticator, type NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import type { NatsConfig } from "../config/schema.ts";
import type { SlotTable } from "../model/slot-table.ts";
import { decodeReport, type Report, ReportDecodeError } from "../reports/report-codec.ts";
import { DEFAULT_JOIN_LIMITS, type JoinLimits, MessageJoiner, splitMessage } from "./message-parts.ts";
import { PeerSlotTables, type PeerView } from "./peer-slots.ts";
import {
  decodeMessagePart,
  decodeRelayedReport,
  decodeSlotTable,
  encodeRelayedReport,
  encodeSlotTable,
  isMessagePart,
  ReplicaDecodeError,
} from "./replica-codec.ts";

/** A peer not heard for this many announce intervals is gone (stopped, or partitioned from us). */
const PEER_SILENCE_INTERVALS = 3;
/** Between attempts of the first connection (later reconnects are the client's). */
const CONNECT_RETRY_MS = 500;

export interface ReplicaExchangeOptions {
  nats: NatsConfig;
  epoch: bigint;
  slots: SlotTable;
  /** Applies a peer's report to the model (as app.ts applies a gateway's). */
  apply: (report: Report) => void;
  logger: Logger;
  now?: () => number;
  /** Bounds on joining messages that came in parts (default DEFAULT_JOIN_LIMITS). */
  joinLimits?: JoinLimits;
}

/** Counters for /metrics (api/prometheus-replicas.ts) and the status document. */
export interface ReplicaStats {
  relayed: number;
  applied: number;
  slotTablesSent: number;
  slotTablesReceived: number;
  disconnects: number;
  /** Messages larger than max_payload sent as parts, and the parts. */
  messagesSplit: number;
  partsSent: number;
  /** Messages that came as parts and were joined whole. */
  messagesJoined: number;
  /** Messages not sent or not applied, by reason (docs/operations.md). */
  dropped: Record<string, number>;
}

export interface ReplicaStatus {
  replicaId: string;
  connected: boolean;
  server: string | null;
  peers: PeerView[];
}

export function defaultReplicaId(): string {
  return `${hostname()}-${process.pid}`;
}

export class ReplicaExchange {
  readonly replicaId: string;
  readonly stats: ReplicaStats = {
    relayed: 0,
    applied: 0,
    slotTablesSent: 0,
    slotTablesReceived: 0,
    disconnects: 0,
    messagesSplit: 0,
    partsSent: 0,
    messagesJoined: 0,
    dropped: {},
  };
  readonly #peers: PeerSlotTables;
  readonly #reports: string;
  readonly #slotTables: string;
  readonly #now: () => number;
  readonly #joiner: MessageJoiner;
  /** Numbers this replica's split messages (u32, wrapping). */
  #nextMessageId = 0;
  #nc: NatsConnection | null = null;
  #connected = false;
  #stopped = false;
  #announcedSlots = -1;
  #timer: NodeJS.Timeout | null = null;
  #ownIdWarned = false;
  /** Further subjects (`<prefix>.<name>` → receiver), e.g. sharded pools' KV events (kv-relay.ts). */
  readonly #channels = new Map<string, (message: Uint8Array) => void>();
  readonly #peerWatchers: Array<() => void> = [];

  constructor(private readonly o: ReplicaExchangeOptions) {
    this.replicaId = o.nats.replicaId ?? defaultReplicaId();
    this.#peers = new PeerSlotTables(o.slots);
    this.#reports = `${o.nats.subjectPrefix}.reports`;
    this.#slotTables = `${o.nats.subjectPrefix}.slots`;
    this.#now = o.now ?? Date.now;
    this.#joiner = new MessageJoiner(o.joinLimits ?? DEFAULT_JOIN_LIMITS, (reason) => this.#drop(reason));
  }

  /** Starts connecting in the background: the control plane serves at once, NATS or not. */
  start(): void {
    void this.#connectLoop();
    this.#timer = setInterval(() => {
      this.#announce();
      this.#joiner.expire(this.#now());
      // Peers fall silent between announcements: the live set is looked at again each interval.
      this.#peersMayHaveChanged();
    }, this.o.nats.announceIntervalMs);
    this.#timer.unref();
  }

  /** A report a gateway posted here, accepted and applied: for the peers. Never waits. */
  relay(body: Uint8Array): void {
    if (this.o.slots.all().length !== this.#announcedSlots) this.#announce();
    const message = encodeRelayedReport({ replica: this.replicaId, epoch: this.o.epoch, report: body });
    if (this.#publish(this.#reports, message)) this.stats.relayed++;
  }

  /** Messages on `<prefix>.<name>`, whole or joined from parts, go to `receive`. Before start(). */
  listen(name: string, receive: (message: Uint8Array) => void): void {
    this.#channels.set(`${this.o.nats.subjectPrefix}.${name}`, receive);
  }

  /** Publishes on `<prefix>.<name>` (in parts when over max_payload); false when not sent. Never waits. */
  send(name: string, payload: Uint8Array): boolean {
    return this.#publish(`${this.o.nats.subjectPrefix}.${name}`, payload);
  }

  /** `watch` runs whenever the live replicas may have changed (a peer heard first, each interval). */
  watchPeers(watch: () => void): void {
    this.#peerWatchers.push(watch);
  }

  /**
   * This replica and the peers heard within the silence timeout that shard pools too: a replica
   * without `nats.shardPools` (another version, or a rolling change of the setting) ingests
   * every pool itself and relays nothing, so it must not be given pools.
   */
  shardingReplicas(): string[] {
    return [
      this.replicaId,
      ...this.peers()
        .filter((p) => p.shardsPools)
        .map((p) => p.replica),
    ];
  }

  /** How long a peer has been silent (0 for this replica; Infinity for one never heard or forgotten). */
  silentForMs(replica: string): number {
    return replica === this.replicaId ? 0 : this.#peers.silentMs(replica, this.#now());
  }

  get announceIntervalMs(): number {
    return this.o.nats.announceIntervalMs;
  }

  get epoch(): bigint {
    return this.o.epoch;
  }

  status(): ReplicaStatus {
    return {
      replicaId: this.replicaId,
      connected: this.#connected,
      server: this.#connected ? (this.#nc?.getServer() ?? null) : null,
      peers: this.peers(),
    };
  }

  peers(): PeerView[] {
    return this.#peers.live(this.#now(), PEER_SILENCE_INTERVALS * this.o.nats.announceIntervalMs);
  }

  get connected(): boolean {
    return this.#connected;
  }

  /** Messages being joined from parts and the bytes they hold. */
  get joining(): { messages: number; bytes: number } {
    return this.#joiner.pending;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== null) clearInterval(this.#timer);
    const nc = this.#nc;
    this.#nc = null;
    this.#connected = false;
    await nc?.close();
  }

  async #connectLoop(): Promise<void> {
    const { nats, logger } = this.o;
    const creds = nats.credentialsFile === undefined ? undefined : readFileSync(nats.credentialsFile);
    while (!this.#stopped) {
      try {
        const nc = await connect({
          servers: nats.servers,
          name: `kvroute ${this.replicaId}`,
          // Our own relayed reports are already applied here.
          noEcho: true,
          // After the first connection the client reconnects by itself, forever.
          maxReconnectAttempts: -1,
          reconnectTimeWait: 500,
          timeout: 2000,
          ...(creds === undefined ? {} : { authenticator: credsAuthenticator(creds) }),
        });
        if (this.#stopped) {
          await nc.close();
          return;
        }
        this.#attach(nc);
        return;
      } catch (err) {
        logger.debug({ err, servers: nats.servers }, "NATS not reachable yet; retrying");
        await new Promise((r) => setTimeout(r, CONNECT_RETRY_MS).unref());
      }
    }
  }

  #attach(nc: NatsConnection): void {
    this.#nc = nc;
    this.#connected = true;
    const { logger } = this.o;
    logger.info({ server: nc.getServer(), replica: this.replicaId }, "replica exchange connected to NATS");
    nc.subscribe(this.#reports, {
      callback: (err, msg) => {
        if (err === null) this.#receive(this.#reports, msg.data, (m) => this.#onReport(m));
      },
    });
    nc.subscribe(this.#slotTables, {
      callback: (err, msg) => {
        if (err === null) this.#receive(this.#slotTables, msg.data, (m) => this.#onSlotTable(m));
      },
    });
    for (const [subject, receive] of this.#channels)
      nc.subscribe(subject, {
        callback: (err, msg) => {
          if (err === null) this.#receive(subject, msg.data, (m) => this.#deliver(receive, m));
        },
      });
    this.#announce();
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "disconnect") {
          this.#connected = false;
          this.stats.disconnects++;
          logger.warn({ server: s.server }, "replica exchange lost NATS; each replica keeps its own view");
        } else if (s.type === "reconnect") {
          this.#connected = true;
          logger.info({ server: s.server }, "replica exchange reconnected to NATS");
          // Peers may have forgotten us meanwhile: tell them our slots before our next report.
          this.#announce();
        }
      }
    })();
    void nc.closed().then(() => {
      this.#connected = false;
    });
  }

  /** A channel's message to its receiver: what it refuses is counted like our own messages. */
  #deliver(receive: (message: Uint8Array) => void, message: Uint8Array): void {
    try {
      receive(message);
    } catch (err) {
      this.#refused(err);
    }
  }

  #peersMayHaveChanged(): void {
    for (const watch of this.#peerWatchers) watch();
  }

  #drop(reason: string): void {
    this.stats.dropped[reason] = (this.stats.dropped[reason] ?? 0) + 1;
  }

  /** Publishes unless disconnected (a report queued for later would be stale when it lands). */
  #publish(subject: string, payload: Uint8Array): boolean {
    const nc = this.#nc;
    if (nc === null || !this.#connected) {
      this.#drop("disconnected");
      return false;
    }
    const max = nc.info?.max_payload;
    if (max !== undefined && payload.length > max) return this.#publishParts(nc, subject, payload, max);
    try {
      nc.publish(subject, payload);
      return true;
    } catch (err) {
      this.o.logger.debug({ err }, "NATS publish failed");
      this.#drop("publish_failed");
      return false;
    }
  }

  /** A message over max_payload, as parts published back to back (message-parts.ts). */
  #publishParts(nc: NatsConnection, subject: string, payload: Uint8Array, max: number): boolean {
    const messageId = this.#nextMessageId;
    this.#nextMessageId = (messageId + 1) >>> 0;
    const parts = splitMessage(payload, max, { replica: this.replicaId, epoch: this.o.epoch, messageId });
    if (parts === null) {
      this.#drop("too_large");
      return false;
    }
    try {
      for (const part of parts) nc.publish(subject, part);
    } catch (err) {
      this.o.logger.debug({ err }, "NATS publish failed");
      this.#drop("publish_failed");
      return false;
    }
    this.stats.messagesSplit++;
    this.stats.partsSent += parts.length;
    return true;
  }

  /** A message off NATS: whole, or a part that may complete one. */
  #receive(subject: string, data: Uint8Array, deliver: (message: Uint8Array) => void): void {
    if (!isMessagePart(data)) {
      deliver(data);
      return;
    }
    try {
      const part = decodeMessagePart(data);
      if (this.#fromUs(part.replica)) return;
      const r = this.#joiner.add(subject, part, this.#now());
      if (r.joined === null) {
        if (r.dropped !== null) this.#drop(r.dropped);
        return;
      }
      this.stats.messagesJoined++;
      deliver(r.joined);
    } catch (err) {
      this.#refused(err);
    }
  }

  #announce(): void {
    const keys = this.o.slots.all().map((s) => s.key);
    if (
      this.#publish(
        this.#slotTables,
        encodeSlotTable({
          replica: this.replicaId,
          epoch: this.o.epoch,
          keys,
          shardsPools: this.o.nats.shardPools,
        }),
      )
    ) {
      this.#announcedSlots = keys.length;
      this.stats.slotTablesSent++;
    }
  }

  #fromUs(replica: string): boolean {
    if (replica !== this.replicaId) return false;
    // noEcho keeps our own messages away: another process uses our id (a misconfigured replicaId).
    this.#drop("own_id");
    if (!this.#ownIdWarned) {
      this.#ownIdWarned = true;
      this.o.logger.error(
        { replica },
        "another process publishes with this replica's id; set nats.replicaId apart",
      );
    }
    return true;
  }

  #onSlotTable(data: Uint8Array): void {
    try {
      const t = decodeSlotTable(data);
      if (this.#fromUs(t.replica)) return;
      const learned = this.#peers.learn(t, this.#now());
      if (learned === "refused") {
        this.#drop("too_many_peers");
        return;
      }
      this.stats.slotTablesReceived++;
      // A peer that just started knows nothing of us: answer so it need not wait an interval.
      if (learned === "new") {
        this.#announce();
        this.#peersMayHaveChanged();
      }
    } catch (err) {
      this.#refused(err);
    }
  }

  #onReport(data: Uint8Array): void {
    try {
      const m = decodeRelayedReport(data);
      if (this.#fromUs(m.replica)) return;
      const mapSlot = this.#peers.mapperFor(m.replica, m.epoch, this.#now());
      if (mapSlot === null) {
        this.#drop("unknown_slot_table");
        return;
      }
      this.o.apply(decodeReport(m.report, mapSlot));
      this.stats.applied++;
    } catch (err) {
      this.#refused(err);
    }
  }

  /** A message that could not be applied: malformed input is counted; anything else is our bug, logged. */
  #refused(err: unknown): void {
    if (err instanceof ReplicaDecodeError || err instanceof ReportDecodeError) {
      this.#drop("malformed");
      return;
    }
    this.#drop("internal");
    this.o.logger.error({ err }, "applying a peer replica's message failed");
  }
}
