// Central-subscriber mode: engines whose --kv-events-config endpoint names kvroute connect to
// us, rank r of *every* such engine to the same `port + r`. One bound SUB socket per address
// therefore carries several streams, each with its own sequence numbers; they are told apart
// by topic (give each engine its own, e.g. llm-d's `kv@<pod>@<model>`).

import { Subscriber } from "zeromq";

/** One stream on a shared socket: its messages, and the socket's connection changes. A bound
 * socket cannot tell which engine a connection belongs to, so every stream hears of each. */
export interface StreamHandler {
  frames(frames: Buffer[]): void;
  connected(): void;
  connectionLost(): void;
}

interface Route {
  topic: Buffer;
  handler: StreamHandler;
}

interface SharedSocket {
  sock: Subscriber;
  routes: Route[];
  loop: Promise<void>;
  watch: Promise<void>;
}

export interface BindPoolOptions {
  receiveHighWaterMark: number;
  maxMessageBytes: number;
}

export class TopicConflictError extends Error {}

export class BindPool {
  private readonly sockets = new Map<string, SharedSocket>();
  /** Messages on a shared socket whose topic matches no attached stream. */
  unrouted = 0;

  constructor(private readonly o: BindPoolOptions) {}

  /**
   * Routes messages on `endpoint` whose topic starts with `topic` to `handler` (the longest
   * matching prefix wins). Binds the socket on first use. Resolves to a release function.
   * Two streams with the same topic on one address cannot be told apart: refused.
   */
  async attach(endpoint: string, topic: string, handler: StreamHandler): Promise<() => void> {
    const topicBuf = Buffer.from(topic, "utf8");
    let shared = this.sockets.get(endpoint);
    if (shared?.routes.some((r) => r.topic.equals(topicBuf))) {
      throw new TopicConflictError(
        `${endpoint} already carries topic "${topic}": engines sharing a bound port need distinct topics`,
      );
    }
    if (shared === undefined) {
      const sock = new Subscriber({
        linger: 0,
        receiveHighWaterMark: this.o.receiveHighWaterMark,
        maxMessageSize: this.o.maxMessageBytes,
      });
      const created: SharedSocket = { sock, routes: [], loop: Promise.resolve(), watch: Promise.resolve() };
      created.watch = this.watch(created); // before bind: no connection event may be missed
      try {
        await sock.bind(endpoint);
      } catch (err) {
        sock.close();
        await created.watch;
        throw err;
      }
      created.loop = this.run(created);
      this.sockets.set(endpoint, created);
      shared = created;
    }
    const route: Route = { topic: topicBuf, handler };
    shared.routes.push(route);
    // Longest prefix first, so the first match is the most specific one.
    shared.routes.sort((a, b) => b.topic.length - a.topic.length);
    shared.sock.subscribe(topicBuf);
    const owner = shared;
    return () => {
      const i = owner.routes.indexOf(route);
      if (i < 0) return;
      owner.routes.splice(i, 1);
      if (owner.sock.closed) return;
      owner.sock.unsubscribe(topicBuf);
      if (owner.routes.length === 0) {
        owner.sock.close();
        this.sockets.delete(endpoint);
      }
    };
  }

  /** The address a shared socket actually bound (resolves a `*` port). */
  boundEndpoint(endpoint: string): string | null {
    return this.sockets.get(endpoint)?.sock.lastEndpoint ?? null;
  }

  private async run(shared: SharedSocket): Promise<void> {
    try {
      for await (const frames of shared.sock) this.route(shared, frames);
    } catch {
      // closed
    }
  }

  private async watch(shared: SharedSocket): Promise<void> {
    try {
      for await (const ev of shared.sock.events) {
        if (ev.type === "disconnect") for (const r of [...shared.routes]) r.handler.connectionLost();
        else if (ev.type === "handshake") for (const r of [...shared.routes]) r.handler.connected();
      }
    } catch {
      // closed
    }
  }

  private route(shared: SharedSocket, frames: Buffer[]): void {
    const topic = frames[0];
    if (topic !== undefined) {
      for (const r of shared.routes) {
        if (topic.length >= r.topic.length && topic.subarray(0, r.topic.length).equals(r.topic)) {
          r.handler.frames(frames);
          return;
        }
      }
    }
    // A lone stream gets even unroutable garbage, so it is counted where it is visible.
    const only = shared.routes.length === 1 ? shared.routes[0] : undefined;
    if (only !== undefined) only.handler.frames(frames);
    else this.unrouted++;
  }

  async close(): Promise<void> {
    const all = [...this.sockets.values()];
    this.sockets.clear();
    for (const s of all) if (!s.sock.closed) s.sock.close();
    await Promise.all(all.flatMap((s) => [s.loop, s.watch]));
  }
}
