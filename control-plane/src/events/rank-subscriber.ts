// The socket shell around RankIngest: one ZMQ SUB socket per DP rank, connecting to the
// engine's PUB (or bound, for engines that connect to a central subscriber), plus the replay
// DEALER on demand. Reconnection is ZMQ's own.

import { type Logger, pino } from "pino";
import { Subscriber } from "zeromq";
import type { SubscriberMode } from "./endpoints.ts";
import { RankIngest } from "./rank-ingest.ts";
import { type ReplayFn, requestReplay } from "./replay-client.ts";
import { newRankStats, type RankStats, ThrottledLog } from "./stats.ts";
import type { EventSink } from "./types.ts";

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
}

export class RankSubscriber {
  readonly stats: RankStats;
  private readonly ingest: RankIngest;
  private readonly logger: Logger;
  private readonly aborter = new AbortController();
  private socket: Subscriber | null = null;
  private loop: Promise<void> | null = null;

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
    if (this.socket !== null) return;
    const sock = new Subscriber({
      linger: 0,
      receiveHighWaterMark: this.o.receiveHighWaterMark ?? 100_000,
      maxMessageSize: this.o.maxMessageBytes ?? 64 * 1024 * 1024,
    });
    this.socket = sock;
    sock.subscribe(this.o.topic ?? "");
    if (this.o.mode === "bind") await sock.bind(this.o.endpoint);
    else sock.connect(this.o.endpoint);
    this.logger.info(
      { slot: this.o.slotKey, rank: this.o.rank, endpoint: this.o.endpoint, mode: this.o.mode },
      "subscribed to KV events",
    );
    this.loop = this.run(sock);
  }

  private async run(sock: Subscriber): Promise<void> {
    try {
      for await (const frames of sock) this.ingest.onFrames(frames);
    } catch (err) {
      // Only a closed or broken socket ends up here, never bad input (RankIngest swallows it).
      if (!sock.closed) this.logger.error({ slot: this.o.slotKey, err }, "KV event socket failed");
    }
  }

  /** The address actually bound or connected (resolves a `*` port in bind mode). */
  get boundEndpoint(): string | null {
    return this.socket?.lastEndpoint ?? null;
  }

  /** Closes the socket, aborts a running replay and waits for both. */
  async stop(): Promise<void> {
    this.ingest.stop();
    this.aborter.abort();
    const sock = this.socket;
    if (sock !== null && !sock.closed) sock.close();
    await this.loop;
    await this.ingest.idle();
  }

  /** Resolves when no replay is in flight (tests and orderly shutdown). */
  idle(): Promise<void> {
    return this.ingest.idle();
  }
}
