// The socket shell around RankIngest: one ZMQ SUB socket per DP rank, connecting to the
// engine's PUB (or bound, for engines that connect to a central subscriber), plus the replay
// DEALER on demand. Reconnection is ZMQ's own; the socket's monitor events tell RankIngest
// when the connection drops and when one is up again, since whoever answers after a drop may
// be a restarted engine (docs/kv-events.md).

import { type Logger, pino } from "pino";
import { Subscriber } from "zeromq";
import type { EventSink } from "../vocabulary/kv-events.ts";
import { BindPool } from "./bind-pool.ts";
import type { SubscriberMode } from "./endpoints.ts";
import { RankIngest } from "./rank-ingest.ts";
import { type ReplayFn, requestReplay } from "./replay-client.ts";
import { newRankStats, type RankStats, ThrottledLog } from "./stats.ts";

export interface RankSubscriberOptions {
  /** Identifies the slot (worker endpoint + rank) to the sink. */
  slotKey: string;
  /** Global DP rank; batches stamped with another rank are dropped. */
  rank: number;
  /** Already offset by rank (see endpoints.ts). */
  endpoint: string;
  mode: SubscriberMode;
  /** Already offset by rank; null = the engine keeps no replay buffer. */
  replayEndpoint?: string | null;
  /** Subscription prefix; "" (vLLM's default topic) receives everything. */
  topic?: string;
  sink: EventSink;
  logger?: Logger;
  replayTimeoutMs?: number;
  maxReplayBatches?: number;
  maxPending?: number;
  logIntervalMs?: number;
  /** Messages ZMQ may queue for us; vLLM's publisher uses 100 000 on its side. */
  receiveHighWaterMark?: number;
  /** Larger messages are refused by ZMQ (the connection is dropped and re-established). */
  maxMessageBytes?: number;
  /** Bind mode: shares one bound socket per address among slots, demultiplexed by topic.
   * Without it the subscriber binds a socket of its own. */
  bindPool?: BindPool;
}

export class RankSubscriber {
  readonly stats: RankStats;
  private readonly ingest: RankIngest;
  private readonly logger: Logger;
  private readonly aborter = new AbortController();
  private socket: Subscriber | null = null;
  private loop: Promise<void> | null = null;
  private watching: Promise<void> | null = null;
  private pool: BindPool | null = null;
  private ownPool = false;
  private release: (() => void) | null = null;

  constructor(private readonly o: RankSubscriberOptions) {
    const replayAt = o.replayEndpoint ?? null;
    this.stats = newRankStats(o.slotKey, o.rank, o.endpoint, o.mode, replayAt);
    this.logger = (o.logger ?? pino({ name: "kvroute" })).child({ component: "kv-events" });
    const replay: ReplayFn | null =
      replayAt === null
        ? null
        : (start) =>
            requestReplay(replayAt, start, {
              timeoutMs: o.replayTimeoutMs ?? 2_000,
              maxBatches: o.maxReplayBatches ?? 100_000,
              signal: this.aborter.signal,
            });
    this.ingest = new RankIngest({
      slotKey: o.slotKey,
      rank: o.rank,
      topic: o.topic ?? "",
      sink: o.sink,
      stats: this.stats,
      log: new ThrottledLog(this.logger, o.logIntervalMs ?? 10_000),
      replay,
      maxPending: o.maxPending ?? 100_000,
    });
  }

  async start(): Promise<void> {
    if (this.socket !== null || this.release !== null) return;
    const receiveHighWaterMark = this.o.receiveHighWaterMark ?? 100_000;
    const maxMessageBytes = this.o.maxMessageBytes ?? 64 * 1024 * 1024;
    if (this.o.mode === "bind") {
      this.ownPool = this.o.bindPool === undefined;
      this.pool = this.o.bindPool ?? new BindPool({ receiveHighWaterMark, maxMessageBytes });
      const ingest = this.ingest;
      this.release = await this.pool.attach(this.o.endpoint, this.o.topic ?? "", {
        frames: (frames) => ingest.onFrames(frames),
        connected: () => ingest.connected(),
        connectionLost: () => ingest.connectionLost(),
      });
      // Engines connect to us and may be connected already: ask ours what it holds.
      ingest.connected();
    } else {
      const sock = new Subscriber({ linger: 0, receiveHighWaterMark, maxMessageSize: maxMessageBytes });
      this.socket = sock;
      this.watching = this.watch(sock); // before connect: the first handshake must be seen
      sock.subscribe(this.o.topic ?? "");
      sock.connect(this.o.endpoint);
      this.loop = this.run(sock);
    }
    this.logger.info(
      { slot: this.o.slotKey, rank: this.o.rank, endpoint: this.o.endpoint, mode: this.o.mode },
      "subscribed to KV events",
    );
  }

  private async run(sock: Subscriber): Promise<void> {
    try {
      for await (const frames of sock) this.ingest.onFrames(frames);
    } catch (err) {
      // Only a closed or broken socket ends up here, never bad input (RankIngest swallows it).
      if (!sock.closed) this.logger.error({ slot: this.o.slotKey, err }, "KV event socket failed");
    }
  }

  private async watch(sock: Subscriber): Promise<void> {
    // One peer: a handshake while the connection is thought up is a reconnection whose
    // disconnect we did not see, and is treated as one.
    let up = false;
    try {
      for await (const ev of sock.events) {
        if (ev.type === "disconnect") {
          up = false;
          this.ingest.connectionLost();
        } else if (ev.type === "handshake") {
          if (up) this.ingest.connectionLost();
          up = true;
          this.ingest.connected();
        }
      }
    } catch {
      // closed
    }
  }

  /** The address actually bound or connected (resolves a `*` port in bind mode). */
  get boundEndpoint(): string | null {
    if (this.pool !== null) return this.pool.boundEndpoint(this.o.endpoint);
    return this.socket?.lastEndpoint ?? null;
  }

  /** Closes the socket (or leaves the shared one), aborts a running replay, waits for both. */
  async stop(): Promise<void> {
    this.ingest.stop();
    this.aborter.abort();
    const sock = this.socket;
    if (sock !== null && !sock.closed) sock.close();
    this.release?.();
    if (this.ownPool) await this.pool?.close();
    await this.loop;
    await this.watching;
    await this.ingest.idle();
  }

  /** Resolves when no replay is in flight (tests and orderly shutdown). */
  idle(): Promise<void> {
    return this.ingest.idle();
  }
}
