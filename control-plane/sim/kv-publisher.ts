// Publishes one engine's KV event batches the way vLLM's ZmqEventPublisher does:
// - PUB socket, frames `[topic, seq (u64 big-endian), msgpack batch]`, seq from 0 per process;
// - the last `buffer_steps` batches kept for replay;
// - a ROUTER replay socket: a DEALER sends `["", start_seq8]`, gets `["", topic, seq8, payload]`
//   for every buffered batch with seq ≥ start, then the end marker `["", "", 0xFF×8, ""]`.
//   vLLM before v0.26 answered without the topic frame (`["", seq8, payload]`, end
//   `["", 0xFF×8, ""]`); `replayForm: "legacy"` reproduces that.
// zeromq.js allows one pending send per socket, so sends go through a queue.
import { Publisher, Router } from "zeromq";
import { type EventEncoding, encodeEventBatch, type KvEvent } from "./kv-events.ts";
import type { KvEventsConfig } from "./kv-events-config.ts";
import { offsetEndpointPort, publisherBinds } from "./kv-events-config.ts";

export type ReplayForm = "topic" | "legacy";

export interface PublisherOptions {
  encoding: EventEncoding;
  replayForm: ReplayForm;
}

const END_SEQ = Buffer.alloc(8, 0xff);

function seqBytes(seq: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(seq);
  return b;
}

export class ZmqKvPublisher {
  private readonly pub: Publisher;
  private replay: Router | null = null;
  private readonly topic: Buffer;
  private seq = 0n;
  private readonly buffer: Array<{ seq: bigint; payload: Buffer }> = [];
  private queue: Promise<void> = Promise.resolve();
  private closed = false;
  readonly endpoint: string;
  readonly replayEndpoint: string | null;

  private constructor(
    private readonly cfg: KvEventsConfig,
    readonly rank: number,
    private readonly opts: PublisherOptions,
    portOffset: number,
  ) {
    this.pub = new Publisher({ sendHighWaterMark: cfg.hwm, linger: 0 });
    this.topic = Buffer.from(cfg.topic, "utf8");
    this.endpoint = offsetEndpointPort(cfg.endpoint, portOffset);
    this.replayEndpoint =
      cfg.replayEndpoint === null ? null : offsetEndpointPort(cfg.replayEndpoint, portOffset);
  }

  /** `rank` goes into each batch; the endpoint ports are offset by `portOffset` (vLLM: the rank). */
  static async create(
    cfg: KvEventsConfig,
    rank: number,
    opts: PublisherOptions,
    portOffset: number = rank,
  ): Promise<ZmqKvPublisher> {
    const p = new ZmqKvPublisher(cfg, rank, opts, portOffset);
    try {
      if (publisherBinds(p.endpoint)) await p.pub.bind(p.endpoint);
      else p.pub.connect(p.endpoint);
      if (p.replayEndpoint !== null) {
        p.replay = new Router({ linger: 0 });
        await p.replay.bind(p.replayEndpoint);
        void p.serveReplay(p.replay);
      }
    } catch (err) {
      p.pub.close();
      p.replay?.close();
      throw new Error(
        `KV events publisher for rank ${rank}: cannot use ${p.endpoint}: ${(err as Error).message}`,
      );
    }
    return p;
  }

  /** Encodes and queues one batch; returns its sequence number. */
  publish(events: KvEvent[], tsSeconds: number): bigint {
    const seq = this.seq++;
    const payload = encodeEventBatch(tsSeconds, events, this.rank, this.opts.encoding);
    this.buffer.push({ seq, payload });
    if (this.buffer.length > this.cfg.bufferSteps) this.buffer.shift();
    const frames = [this.topic, seqBytes(seq), payload];
    this.queue = this.queue.then(async () => {
      if (this.closed) return;
      try {
        await this.pub.send(frames);
      } catch {
        // A PUB socket drops on overflow like vLLM's; a failed send must not stop the stream.
      }
    });
    return seq;
  }

  /** Batches published so far (the next sequence number). */
  get published(): number {
    return Number(this.seq);
  }

  /** Resolves when every queued batch has been handed to ZeroMQ. */
  flush(): Promise<void> {
    return this.queue;
  }

  async close(): Promise<void> {
    await this.queue;
    this.closed = true;
    this.pub.close();
    this.replay?.close();
  }

  private async serveReplay(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        if (frames.length !== 3) continue; // vLLM logs and ignores malformed requests
        const [id, , start] = frames as [Buffer, Buffer, Buffer];
        if (start.length !== 8) continue;
        const from = start.readBigUInt64BE();
        // Snapshot: batches published while replying are not part of this answer.
        for (const b of this.buffer.slice()) {
          if (b.seq < from) continue;
          if (this.opts.replayForm === "topic")
            await router.send([id, "", this.topic, seqBytes(b.seq), b.payload]);
          else await router.send([id, "", seqBytes(b.seq), b.payload]);
        }
        if (this.opts.replayForm === "topic") await router.send([id, "", "", END_SEQ, ""]);
        else await router.send([id, "", END_SEQ, ""]);
      }
    } catch (err) {
      // Replay is best effort (vLLM logs and carries on); the live stream is unaffected.
      if (!this.closed && !router.closed)
        process.emitWarning(`KV events replay for rank ${this.rank} stopped: ${err}`);
    }
  }
}
