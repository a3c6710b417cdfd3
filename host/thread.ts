// One Envoy worker thread's Wasm VM: its own instance of the module, its own root context, its own
// tick timer and its own context ids (root 1, streams 2, 3, … never reused — ContextBase ctor /
// WasmBase::allocContextId). Calls into the module follow proxy-wasm-cpp-host:
// - the "current context" is the callee context; proxy_set_effective_context retargets host
//   calls until the outermost call returns (SaveRestoreContext in src/wasm_vm.h);
// - after every call-in, the queued "after VM call" actions run (DeferAfterCallActions), which is
//   how continue_stream, send_local_response and http-call cleanups are deferred in Envoy;
// - a trap marks the whole VM failed (WasmBase::fail): later callbacks are skipped and HTTP
//   callbacks apply the failure policy (CHECK_FAIL in src/context.cc).
import { type Pairs, WasmResult } from "./abi/constants.ts";
import { GuestMemory } from "./abi/memory.ts";
import type { HostCore } from "./core.ts";
import { proxyImports } from "./imports/proxy.ts";
import { wasiImports } from "./imports/wasi.ts";
import { checkModule } from "./loader.ts";
import { VmMetrics } from "./metrics.ts";
import type { HttpStream } from "./stream.ts";

export interface RootContext {
  kind: "root";
  id: number;
}
export interface VmContext {
  kind: "vm";
  id: 0;
}
export interface StreamContext {
  kind: "stream";
  id: number;
  rootId: number;
  stream: HttpStream;
}
export type Ctx = RootContext | VmContext | StreamContext;

export interface HttpCallResponse {
  headers: Pairs;
  body: Uint8Array;
  trailers: Pairs;
}

type WasmFn = (...args: Array<number | bigint>) => number | bigint | undefined;

export class VmFailedError extends Error {}

export class WasmThread {
  readonly mem: GuestMemory;
  readonly metrics: VmMetrics;
  readonly contexts = new Map<number, Ctx>();
  readonly vmContext: VmContext = { kind: "vm", id: 0 };
  root: RootContext | null = null;
  failed = false;
  failMessage = "";
  /** True while _start/_initialize runs: only the calls in ALLOWED_DURING_START succeed. */
  restricted = false;
  /** Plugin configuration is readable only inside proxy_on_configure (Envoy temp_plugin_). */
  inConfigure = false;
  /** Root-context state Envoy keeps on the root Context (status_code_, http_call_response_). */
  statusCode = 0;
  statusMessage = "";
  httpCallResponse: HttpCallResponse | null = null;
  /** Outstanding proxy_http_call tokens → cancel function. */
  readonly httpCalls = new Map<number, () => void>();
  nextHttpCallId = 1;
  /** Pending tasks for this thread (the worker's dispatcher queue). */
  readonly tasks: Array<() => void> = [];
  private readonly exp: Record<string, WasmFn>;
  private nextContextId = 1;
  private readonly stack: Ctx[] = [];
  private effective = 0;
  private afterActions: Array<() => void> = [];
  private nextIterationStopped = false;
  private tickTimer: NodeJS.Timeout | null = null;
  private drainScheduled = false;

  constructor(
    readonly core: HostCore,
    readonly index: number,
    readonly name: string,
  ) {
    const checked = checkModule(core.code);
    let malloc: (n: number) => number = () => 0;
    const instance = new WebAssembly.Instance(checked.module, {
      env: proxyImports(this),
      wasi_snapshot_preview1: wasiImports(this),
      wasi_unstable: wasiImports(this),
    });
    this.exp = instance.exports as unknown as Record<string, WasmFn>;
    const memory = instance.exports.memory as WebAssembly.Memory;
    const allocator = (this.exp.malloc ?? this.exp.proxy_on_memory_allocate) as WasmFn;
    malloc = (n) => Number(allocator(n));
    this.mem = new GuestMemory(memory, (n) => malloc(n));
    this.metrics = new VmMetrics(core.stats);
  }

  // ---- context bookkeeping -------------------------------------------------------------

  allocContextId(): number {
    return this.nextContextId++;
  }

  /** contextOrEffectiveContext(): the effective context when set and still alive. */
  current(): Ctx {
    const top = this.stack[this.stack.length - 1] ?? this.vmContext;
    if (this.effective !== 0) return this.contexts.get(this.effective) ?? top;
    return top;
  }

  setEffective(id: number): number {
    if (!this.contexts.has(id)) return WasmResult.BadArgument;
    this.effective = id;
    return WasmResult.Ok;
  }

  get onStack(): boolean {
    return this.stack.length > 0;
  }

  stopNextIteration(): void {
    this.nextIterationStopped = true;
  }

  get isNextIterationStopped(): boolean {
    return this.nextIterationStopped;
  }

  addAfterVmCallAction(f: () => void): void {
    this.afterActions.push(f);
  }

  // ---- calls into the module -----------------------------------------------------------

  /** One raw call-in with SaveRestoreContext semantics; a trap fails the VM. */
  call(ctx: Ctx, name: string, ...args: Array<number | bigint>): number | undefined {
    if (this.failed) return undefined;
    const fn = this.exp[name];
    if (typeof fn !== "function") return undefined;
    this.stack.push(ctx);
    const saved = this.effective;
    this.effective = 0;
    this.core.scheduler.enter(this);
    try {
      const r = fn(...args);
      return r === undefined ? 0 : Number(r);
    } catch (e) {
      this.fail(`Function: ${name} failed: ${e instanceof Error ? e.message : String(e)}`);
      return undefined;
    } finally {
      this.stack.pop();
      this.effective = saved;
      this.core.scheduler.leave(this);
    }
  }

  /**
   * DeferAfterCallActions around `body`: the body (call-in + result conversion) runs first, then
   * the iteration-stop flag is cleared and queued actions run until the queue is empty.
   */
  deferred<T>(body: () => T): T {
    try {
      return body();
    } finally {
      this.nextIterationStopped = false;
      while (this.afterActions.length > 0) {
        const f = this.afterActions.shift() as () => void;
        f();
      }
    }
  }

  has(name: string): boolean {
    return typeof this.exp[name] === "function";
  }

  fail(message: string): void {
    if (this.failed) return;
    this.failed = true;
    this.failMessage = message;
    this.core.log({ thread: this.name, level: 5, message: `wasm failed: ${message}`, contextId: 0 });
    this.setTickPeriod(0);
    for (const cancel of this.httpCalls.values()) cancel();
    this.httpCalls.clear();
  }

  // ---- VM start-up (WasmBase::startVm, ContextBase::onStart/onConfigure) --------------

  start(): void {
    this.restricted = true;
    try {
      if (this.has("_initialize")) {
        this.call(this.vmContext, "_initialize");
        if (this.has("main")) this.call(this.vmContext, "main", 0, 0);
        else if (this.has("__main_void")) this.call(this.vmContext, "__main_void");
      } else if (this.has("_start")) {
        this.call(this.vmContext, "_start");
      }
    } finally {
      this.restricted = false;
    }
    if (this.failed) throw new VmFailedError(`Failed to start base Wasm: ${this.failMessage}`);
    const root: RootContext = { kind: "root", id: this.allocContextId() };
    this.contexts.set(root.id, root);
    this.root = root;
    const ok = this.deferred(() => {
      this.call(root, "proxy_on_context_create", root.id, 0);
      return this.call(root, "proxy_on_vm_start", root.id, this.core.vmConfig.length);
    });
    if (this.failed) throw new VmFailedError(`Failed to start base Wasm: ${this.failMessage}`);
    if (ok === 0) throw new VmFailedError("Failed to start base Wasm: proxy_on_vm_start returned false");
    const configured = this.deferred(() => {
      this.inConfigure = true;
      try {
        return this.call(root, "proxy_on_configure", root.id, this.core.pluginConfig.length);
      } finally {
        this.inConfigure = false;
      }
    });
    if (this.failed) throw new VmFailedError(`Failed to configure base Wasm plugin: ${this.failMessage}`);
    if (configured === 0) {
      throw new VmFailedError("Failed to configure base Wasm plugin: proxy_on_configure returned false");
    }
  }

  // ---- dispatcher ----------------------------------------------------------------------

  /** Dispatcher::post: run `task` later on this thread (never inline). */
  post(task: () => void): void {
    this.tasks.push(task);
    if (!this.drainScheduled) {
      this.drainScheduled = true;
      setImmediate(() => this.drain());
    }
  }

  private drain(): void {
    this.drainScheduled = false;
    // Run only what was queued so far; new posts wait for the next turn like a real event loop.
    const n = this.tasks.length;
    for (let k = 0; k < n && this.tasks.length > 0; k++) this.runOneTask();
  }

  /** Runs the oldest queued task now (also used by the scheduler to preempt). */
  runOneTask(): boolean {
    const t = this.tasks.shift();
    if (t === undefined) return false;
    try {
      t();
    } catch (e) {
      this.core.log({ thread: this.name, level: 4, message: `host task error: ${String(e)}`, contextId: 0 });
    }
    return true;
  }

  // ---- timers, queues, http calls ------------------------------------------------------

  /** WasmBase::setTimerPeriod for the root context: 0 stops; each period fires proxy_on_tick. */
  setTickPeriod(ms: number): void {
    if (this.tickTimer) clearInterval(this.tickTimer);
    this.tickTimer = null;
    if (ms > 0 && !this.failed) {
      this.tickTimer = setInterval(() => this.post(() => this.onTick()), ms);
      this.tickTimer.unref();
    }
  }

  private onTick(): void {
    const root = this.root;
    if (!root || this.failed) return;
    this.deferred(() => this.call(root, "proxy_on_tick", root.id));
  }

  deliverQueueReady(contextId: number, token: number): void {
    const ctx = this.contexts.get(contextId);
    if (!ctx || this.failed) return;
    this.deferred(() => this.call(ctx, "proxy_on_queue_ready", contextId, token));
  }

  /** Context::onHttpCallSuccess/onHttpCallFailure, delivered on this thread to the root. */
  deliverHttpCallResponse(token: number, response: HttpCallResponse | null): void {
    if (!this.httpCalls.has(token)) return;
    const root = this.root;
    if (!root || this.failed) return;
    this.deferred(() => {
      if (response === null) {
        this.statusCode = WasmResult.BrokenConnection;
        this.statusMessage = "reset";
        this.addAfterVmCallAction(() => {
          this.statusMessage = "";
          this.httpCalls.delete(token);
        });
        this.call(root, "proxy_on_http_call_response", root.id, token, 0, 0, 0);
      } else {
        this.httpCallResponse = response;
        this.addAfterVmCallAction(() => {
          this.httpCallResponse = null;
          this.httpCalls.delete(token);
        });
        this.call(
          root,
          "proxy_on_http_call_response",
          root.id,
          token,
          response.headers.length,
          response.body.length,
          response.trailers.length,
        );
      }
    });
  }

  close(): void {
    this.setTickPeriod(0);
    for (const cancel of this.httpCalls.values()) cancel();
    this.httpCalls.clear();
  }
}
