// GET /v1/events/status: the status document as server-sent events, every intervalMs.
// One timer and one serialisation per tick however many dashboards are open; the timer runs
// only while someone listens. A client that cannot keep up (its socket buffer still full)
// skips ticks instead of making the server queue documents for it.
import type { IncomingMessage, ServerResponse } from "node:http";

/** How long a browser waits before reconnecting after the stream drops (SSE `retry:`). */
const RETRY_MS = 2000;

export class StatusStream {
  readonly #clients = new Set<ServerResponse>();
  #timer: NodeJS.Timeout | null = null;
  #id = 0;

  constructor(
    private readonly build: () => unknown,
    private readonly intervalMs = 500,
  ) {}

  get clients(): number {
    return this.#clients.size;
  }

  /** Whether the tick timer runs (it must not while nobody listens). */
  get ticking(): boolean {
    return this.#timer !== null;
  }

  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      connection: "keep-alive",
      // Proxies such as nginx buffer responses by default; an event stream must not be.
      "x-accel-buffering": "no",
    });
    req.socket.setNoDelay(true);
    res.write(`retry: ${RETRY_MS}\n\n`);
    // The first document at once, so a page is filled without waiting for the next tick.
    res.write(this.#frame());
    this.#clients.add(res);
    res.once("close", () => {
      this.#clients.delete(res);
      if (this.#clients.size === 0) this.#stop();
    });
    if (this.#timer === null) {
      this.#timer = setInterval(() => this.#tick(), this.intervalMs);
      this.#timer.unref();
    }
  };

  #tick(): void {
    const frame = this.#frame();
    for (const res of this.#clients) if (!res.writableNeedDrain) res.write(frame);
  }

  #stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  #frame(): string {
    // JSON.stringify never emits a raw newline, so the document is exactly one `data:` line.
    const json = JSON.stringify(this.build(), (_k, v) => (typeof v === "bigint" ? v.toString() : v));
    return `event: status\nid: ${++this.#id}\ndata: ${json}\n\n`;
  }
}
