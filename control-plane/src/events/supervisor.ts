// Keeps one RankSubscriber per (slot, endpoint) in line with what discovery reports: new
// ranks get a subscriber, vanished ones are stopped. It knows nothing of discovery itself.

import type { Logger } from "pino";
import type { EventSink } from "../vocabulary/kv-events.ts";
import { BindPool } from "./bind-pool.ts";
import { RankSubscriber, type RankSubscriberOptions } from "./rank-subscriber.ts";
import type { RankStats } from "./stats.ts";

/** What discovery says about one rank's event stream. */
export type SubscriptionSpec = Omit<RankSubscriberOptions, "sink" | "logger" | "bindPool">;

export interface SupervisorOptions {
  sink: EventSink;
  logger?: Logger;
}

function specKey(s: SubscriptionSpec): string {
  return [s.slotKey, s.rank, s.mode, s.endpoint, s.replayEndpoint ?? "", s.topic ?? ""].join("|");
}

export class EventsSupervisor {
  private readonly subs = new Map<string, RankSubscriber>();
  /** Bound addresses are shared: every engine's rank r connects to the same port + r. */
  private readonly bindPool = new BindPool({
    receiveHighWaterMark: 100_000,
    maxMessageBytes: 64 * 1024 * 1024,
  });

  constructor(private readonly o: SupervisorOptions) {}

  /**
   * Starts subscribers for new specs and stops those no longer listed. A changed spec is a new
   * subscription and starts like a first connect (catch-up replay, no reset); dropping the
   * index of a slot that went away is the caller's business, not this layer's.
   * Resolves when every change has taken effect; a spec that fails to start (e.g. a bind
   * address in use) is logged and left out, so one bad rank never blocks the others.
   */
  async sync(specs: readonly SubscriptionSpec[]): Promise<void> {
    const wanted = new Map(specs.map((s) => [specKey(s), s]));
    const stopping: Promise<void>[] = [];
    for (const [key, sub] of this.subs) {
      if (!wanted.has(key)) {
        this.subs.delete(key);
        stopping.push(sub.stop());
      }
    }
    await Promise.all(stopping);
    for (const [key, spec] of wanted) {
      if (this.subs.has(key)) continue;
      const sub = new RankSubscriber({
        ...spec,
        sink: this.o.sink,
        logger: this.o.logger,
        bindPool: this.bindPool,
      });
      try {
        await sub.start();
        this.subs.set(key, sub);
      } catch (err) {
        await sub.stop();
        this.o.logger?.error(
          { slot: spec.slotKey, endpoint: spec.endpoint, err },
          "KV event subscriber failed to start",
        );
      }
    }
  }

  stats(): RankStats[] {
    return [...this.subs.values()].map((s) => s.stats);
  }

  /** Messages on shared bound sockets that matched no configured topic. */
  unrouted(): number {
    return this.bindPool.unrouted;
  }

  async stop(): Promise<void> {
    const subs = [...this.subs.values()];
    this.subs.clear();
    await Promise.all(subs.map((s) => s.stop()));
    await this.bindPool.close();
  }
}
