// Test support: a publisher in vLLM's exact ZMQ framing (PUB + replay ROUTER), and a sink
// that records what the subscriber delivers.

import { Publisher, Router } from "zeromq";
import { encodeSeq } from "../../control-plane/src/events/frames.ts";
import type {
  BatchMeta,
  EventSink,
  KvEvent,
  RankResetReason,
} from "../../control-plane/src/vocabulary/kv-events.ts";

export type Delivery =
  | { kind: "event"; slot: string; event: KvEvent; meta: BatchMeta }
  | { kind: "reset"; slot: string; reason: RankResetReason };

export class RecordingSink implements EventSink {
  readonly log: Delivery[] = [];
  event(slot: string, event: KvEvent, meta: BatchMeta): void {
    this.log.push({ kind: "event", slot, event, meta });
  }
  rankReset(slot: string, reason: RankResetReason): void {
    this.log.push({ kind: "reset", slot, reason });
  }
  /** Compact trace: "seq:Type" per event, "reset:reason" per reset. */
  trace(): string[] {
    return this.log.map((d) => (d.kind === "event" ? `${d.meta.seq}:${d.event.type}` : `reset:${d.reason}`));
  }
}

export async function until(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
  what = "condition",
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Like vLLM's ZmqEventPublisher: a PUB socket, a replay buffer and an optional ROUTER. */
export class TestEngine {
  readonly pub = new Publisher({ linger: 0 });
  router: Router | null = null;
  readonly buffer: { seq: number; payload: Buffer }[] = [];
  endpoint = "";
  replayAt = "";
  private serving: Promise<void> | null = null;

  constructor(readonly topic = "kv") {}

  /** Binds the PUB on an ephemeral loopback port (engine-binds mode), or on `at`: a restarted
   * engine takes over its predecessor's address. */
  async bind(at = "tcp://127.0.0.1:*"): Promise<this> {
    await this.pub.bind(at);
    this.endpoint = this.pub.lastEndpoint as string;
    return this;
  }

  /**
   * Serves replay requests from `buffer`: `withTopic` = vLLM ≥ 0.26 layout, else the older one;
   * `silent` never answers (timeout tests).
   */
  async serveReplay(opts: { withTopic: boolean; silent?: boolean; at?: string }): Promise<string> {
    const router = new Router({ linger: 0 });
    this.router = router;
    await router.bind(opts.at ?? "tcp://127.0.0.1:*");
    this.replayAt = router.lastEndpoint as string;
    const topic = Buffer.from(this.topic);
    const E = Buffer.alloc(0);
    const END = Buffer.alloc(8, 0xff);
    this.serving = (async () => {
      try {
        for await (const [id, , startFrame] of router) {
          if (opts.silent || id === undefined || startFrame === undefined) continue;
          const start = Number(startFrame.readBigUInt64BE(0));
          for (const { seq, payload } of this.buffer) {
            if (seq < start) continue;
            await router.send(
              opts.withTopic ? [id, E, topic, encodeSeq(seq), payload] : [id, E, encodeSeq(seq), payload],
            );
          }
          await router.send(opts.withTopic ? [id, E, E, END, E] : [id, E, END, E]);
        }
      } catch {
        // closed
      }
    })();
    return this.replayAt;
  }

  /** Publishes and records in the replay buffer (vLLM keeps what it published). */
  async publish(seq: number, payload: Buffer, opts: { live?: boolean } = {}): Promise<void> {
    this.buffer.push({ seq, payload });
    if (opts.live !== false) await this.pub.send([this.topic, encodeSeq(seq), payload]);
  }

  async sendRaw(frames: Buffer[]): Promise<void> {
    await this.pub.send(frames);
  }

  async close(): Promise<void> {
    this.pub.close();
    this.router?.close();
    await this.serving;
  }
}
