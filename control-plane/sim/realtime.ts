// Drives one Engine in real time for the HTTP server: a step is planned, the process waits
// its modelled duration (times `timeScale`, so tests can run 100× faster), then the step's
// tokens go to their requests' listeners and its KV events to the publisher.
import type { Engine, EngineRequest, EngineRequestSpec, TokenOutput } from "./engine.ts";
import type { KvEvent } from "./kv-events.ts";

export interface RequestListener {
  onToken(out: TokenOutput): void;
}

export interface RealtimeEngineOptions {
  timeScale: number;
  /** Called with each step's KV events and the wall-clock time in seconds. */
  onEvents?: (events: KvEvent[], tsSeconds: number) => void;
  /** Called when a request finishes (for the balancer's in-flight counts). */
  onFinished?: (req: EngineRequest) => void;
}

export class RealtimeEngine {
  private readonly listeners = new Map<EngineRequest, RequestListener>();
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly start = performance.now();

  constructor(
    readonly engine: Engine,
    private readonly opts: RealtimeEngineOptions,
  ) {}

  /** Milliseconds of simulated time since start (real time divided by the time scale). */
  nowMs(): number {
    return (performance.now() - this.start) / this.opts.timeScale;
  }

  submit(spec: EngineRequestSpec, listener: RequestListener): EngineRequest {
    const req = this.engine.add(spec, this.nowMs());
    this.listeners.set(req, listener);
    this.kick();
    return req;
  }

  abort(req: EngineRequest): void {
    if (req.status === "finished") return;
    this.engine.abort(req);
    this.listeners.delete(req);
    this.opts.onFinished?.(req);
  }

  /** Publishes events produced outside a step (a cache reset). */
  flushEvents(): void {
    const events = this.engine.drainEvents();
    if (events.length > 0) this.opts.onEvents?.(events, Date.now() / 1000);
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private kick(): void {
    if (this.closed || this.engine.busy) return;
    // setImmediate: requests arriving in the same tick join the same step.
    this.engine.busy = true;
    setImmediate(() => {
      this.engine.busy = false;
      this.runStep();
    });
  }

  private runStep(): void {
    if (this.closed) return;
    const step = this.engine.schedule();
    if (!step) return;
    this.timer = setTimeout(
      () => {
        this.timer = null;
        if (this.closed) return;
        const result = this.engine.complete(step, this.nowMs());
        if (result.events.length > 0) this.opts.onEvents?.(result.events, Date.now() / 1000);
        for (const out of result.outputs) {
          this.listeners.get(out.request)?.onToken(out);
          if (out.finished) {
            this.listeners.delete(out.request);
            this.opts.onFinished?.(out.request);
          }
        }
        this.runStep();
      },
      Math.max(0, step.durationMs * this.opts.timeScale),
    );
  }
}
