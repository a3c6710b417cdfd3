// One Envoy worker thread's Wasm VM: its own instance of the module, its own root contexts (one per
// plugin configuration: a config change with the same vm_id and code adds a second root context to
// the running VM — WasmBase::start keyed by the plugin key, which hashes root_id + configuration),
// one tick timer per root context (Envoy Wasm::setTimerPeriod(root_context_id)), and its own
// context ids (root 1, streams 2, 3, … never reused — ContextBase ctor / WasmBase::allocContextId).
// Calls into the module follow proxy-wasm-cpp-host:
// - the "current context" is the callee context; proxy_set_effective_context retargets host
//   calls until the outermost call returns (SaveRestoreContext in src/wasm_vm.h);
// - after every call-in, the queued "after VM call" actions run (DeferAfterCallActions), which is
//   how continue_stream, send_local_response and http-call cleanups are deferred in Envoy;
// - a trap marks the whole VM failed (WasmBase::fail): later callbacks are skipped and HTTP
//   callbacks apply the failure policy (CHECK_FAIL in src/context.cc).
import { type Pairs, WasmResult } from "./abi/constants.ts";
import { GuestMemory } from "./abi/memory.ts";
import type { HostCore } from "./core.ts";
import { checkModule } from "./loader.ts";
import { VmMetrics } from "./metrics.ts";

export interface RootContext {
  kind: "root";
  id: number;
}

/** What Envoy keeps per root context: its plugin (configuration), timer and shutdown state. */
export interface RootState {
  ctx: RootContext;
  /** The plugin configuration this root context was configured with (PluginBase). */
  pluginConfig: Uint8Array;
  /** Tick period (ms); 0 = no timer. */
  tickMs: number;
  timer: NodeJS.Timeout | null;
  /** Its plugin config was replaced: no new streams; on_done once its last stream is gone. */
  retired: boolean;
  /** on_done returned false: waiting for proxy_done (WasmBase pending_done_). */
  pendingDone: boolean;
}

/** An outstanding proxy_http_call: the root context that answers it, its :path, how to cancel it. */
export interface HttpCallEntry {
  rootId: number;
  path: string;
  cancel: () => void;
}
export interface VmContext {
  kind: "vm";
  id: 0;
}
/** A stream's context (stream.ts HttpStreamContext adds the stream it belongs to). */
export interface StreamContext {
  kind: "stream";
  id: number;
  rootId: number;
}
export type Ctx = RootContext | VmContext | StreamContext;

export interface HttpCallResponse {
  headers: Pairs;
  body: Uint8Array;
  trailers: Pairs;
}

type WasmFn = (...args: Array<number | bigint>) => number | bigint | undefined;

export class VmFailedError extends Error {}

/** The host functions a new VM links against, by module name (env, wasi_snapshot_preview1, …). */
export type HostImports = (thread: WasmThread) => WebAssembly.Imports;

let linkedImports: HostImports | undefined;

/**
 * Sets the host functions every VM built from now on links against (host.ts registers
 * imports/index.ts hostImports). A registry rather than an import: the ABI modules use the
 * thread, so the thread must not import them.
 */
export function registerHostImports(imports: HostImports): void {
  linkedImports = imports;
}

/** proxy-wasm-cpp-host WasmBase: http-call tokens are (HttpCall = 0) + 4, + 8, … per VM. */
const CALLOUT_INCREMENT = 4;

/** The VM's context table; removing a stream's context may let a retired root context finish. */
class ContextTable extends Map<number, Ctx> {
  constructor(private readonly onRemoved: (ctx: Ctx) => void) {
    super();
  }
  override delete(id: number): boolean {
    const ctx = this.get(id);
    const removed = super.delete(id);
    if (ctx !== undefined) this.onRemoved(ctx);
    return removed;
  }
}

export class WasmThread {
  readonly mem: GuestMemory;
  readonly metrics: VmMetrics;
  readonly contexts: Map<number, Ctx> = new ContextTable((c) => this.contextRemoved(c));
  readonly vmContext: VmContext = { kind: "vm", id: 0 };
  /** Root contexts by id, oldest first. */
  readonly roots = new Map<number, RootState>();
  failed = false;
  failMessage = "";
  /** True while _start/_initialize runs: only the calls in ALLOWED_DURING_START succeed. */
  restricted = false;
  /** Plugin configuration readable only inside proxy_on_configure (Envoy temp_plugin_). */
  configuringPlugin: Uint8Array | null = null;
  /** Root-context state Envoy keeps on the root Context (status_code_, http_call_response_). */
  statusCode = 0;
  statusMessage = "";
  httpCallResponse: HttpCallResponse | null = null;
  /** Outstanding proxy_http_call tokens → the calling root and a cancel function. */
  readonly httpCalls = new Map<number, HttpCallEntry>();
  private lastHttpCallId = 0;
  /** Pending tasks for this thread (the worker's dispatcher queue). */
  readonly tasks: Array<() => void> = [];
  private readonly exp: Record<string, WasmFn>;
  private nextContextId = 1;
  private readonly stack: Ctx[] = [];
  private effective = 0;
  private afterActions: Array<() => void> = [];
  private nextIterationStopped = false;
  /** The pending turn that drains `tasks`, if any (cleared on close: a closed thread is not kept alive by it). */
  private drainScheduled: NodeJS.Immediate | undefined;

  constructor(
    readonly core: HostCore,
    readonly index: number,
    readonly name: string,
  ) {
    const checked = checkModule(core.code);
    if (linkedImports === undefined)
      throw new Error("no host imports registered (host/host.ts registers them)");
    let malloc: (n: number) => number = () => 0;
    const instance = new WebAssembly.Instance(checked.module, linkedImports(this));
    this.exp = instance.exports as unknown as Record<string, WasmFn>;
    const memory = instance.exports.memory as WebAssembly.Memory;
    const allocator = (this.exp.malloc ?? this.exp.proxy_on_memory_allocate) as WasmFn;
    malloc = (n) => Number(allocator(n));
    this.mem = new GuestMemory(memory, (n) => malloc(n));
    this.metrics = new VmMetrics(core.stats);
  }

  /** The root context new streams attach to: the newest one whose configuration is current. */
  get root(): RootContext | null {
    let active: RootContext | null = null;
    for (const r of this.roots.values()) if (!r.retired) active = r.ctx;
    return active;
  }

  // ---- context bookkeeping -------------------------------------------------------------

  allocContextId(): number {
    return this.nextContextId++;
  }

  nextHttpCallId(): number {
    this.lastHttpCallId = (this.lastHttpCallId + CALLOUT_INCREMENT) >>> 0;
    return this.lastHttpCallId;
  }

  /** contextOrEffectiveContext(): the effective context when set and still alive. */
  current(): Ctx {
    const top = this.stack[this.stack.length - 1] ?? this.vmContext;
    if (this.effective !== 0) return this.contexts.get(this.effective) ?? top;
    return top;
  }

  /** ContextBase::root_context(): a root context itself, or a stream's parent root. */
  rootIdOf(c: Ctx): number {
    return c.kind === "stream" ? c.rootId : c.id;
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
    this.stopTimers();
    for (const c of this.httpCalls.values()) c.cancel();
    this.httpCalls.clear();
  }

  // ---- VM start-up (WasmBase::startVm, ContextBase::onStart/onConfigure) --------------

  /**
   * A new VM: _start (or _initialize + main) restricted, then the root context of the current
   * plugin configuration. V8 clones are "CompiledBytecode" (src/v8/v8.cc), so every thread-local
   * VM — also one that FAIL_RELOAD builds after a trap — runs _start again (WasmBase::initialize).
   */
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
    this.addRoot(this.core.pluginConfig);
  }

  /**
   * WasmBase::start + configure for one plugin: a new root context (on_context_create(id, 0),
   * on_vm_start — ContextBase::onStart calls it for every root context — then on_configure with
   * this plugin's configuration readable). A failure throws, like Envoy rejecting the config.
   */
  addRoot(pluginConfig: Uint8Array): RootContext {
    const ctx: RootContext = { kind: "root", id: this.allocContextId() };
    this.contexts.set(ctx.id, ctx);
    const state: RootState = {
      ctx,
      pluginConfig,
      tickMs: 0,
      timer: null,
      retired: false,
      pendingDone: false,
    };
    this.roots.set(ctx.id, state);
    const ok = this.deferred(() => {
      this.call(ctx, "proxy_on_context_create", ctx.id, 0);
      return this.call(ctx, "proxy_on_vm_start", ctx.id, this.core.vmConfig.length);
    });
    if (this.failed) throw new VmFailedError(`Failed to start base Wasm: ${this.failMessage}`);
    if (ok === 0) throw new VmFailedError("Failed to start base Wasm: proxy_on_vm_start returned false");
    const configured = this.deferred(() => {
      this.configuringPlugin = pluginConfig;
      try {
        return this.call(ctx, "proxy_on_configure", ctx.id, pluginConfig.length);
      } finally {
        this.configuringPlugin = null;
      }
    });
    if (this.failed) throw new VmFailedError(`Failed to configure base Wasm plugin: ${this.failMessage}`);
    if (configured === 0) {
      throw new VmFailedError("Failed to configure base Wasm plugin: proxy_on_configure returned false");
    }
    return ctx;
  }

  /**
   * The plugin configuration of root `id` was replaced: its handle goes away once the last stream
   * holding it ends (~PluginHandleBase → WasmBase::startShutdown(plugin_key)): then on_done(root),
   * and on_delete(root) when on_done returned true, or later from proxy_done.
   */
  retireRoot(id: number): void {
    const r = this.roots.get(id);
    if (r === undefined || r.retired) return;
    r.retired = true;
    this.maybeShutDown(r);
  }

  private contextRemoved(ctx: Ctx): void {
    if (ctx.kind !== "stream") return;
    const r = this.roots.get(ctx.rootId);
    if (r?.retired) this.maybeShutDown(r);
  }

  private maybeShutDown(r: RootState): void {
    if (r.pendingDone) return;
    for (const c of this.contexts.values()) if (c.kind === "stream" && c.rootId === r.ctx.id) return;
    // ContextBase::onDone: a failed VM is not called and counts as done.
    const done = this.failed ? 1 : this.deferred(() => this.call(r.ctx, "proxy_on_done", r.ctx.id));
    if (done === undefined || done !== 0) this.deleteRoot(r);
    else r.pendingDone = true;
  }

  /** proxy_done from root `id` (WasmBase::done): NotFound unless its on_done returned false. */
  done(id: number): number {
    const r = this.roots.get(id);
    if (r === undefined || !r.pendingDone) return WasmResult.NotFound;
    // The delete is deferred so that on_delete does not run inside the proxy_done call.
    this.addAfterVmCallAction(() => this.deleteRoot(r));
    return WasmResult.Ok;
  }

  private deleteRoot(r: RootState): void {
    if (!this.roots.has(r.ctx.id)) return;
    if (!this.failed) this.deferred(() => this.call(r.ctx, "proxy_on_delete", r.ctx.id));
    this.setTickPeriod(r.ctx.id, 0);
    // Envoy's Context destructor cancels the root's outstanding calls.
    for (const [token, c] of this.httpCalls) {
      if (c.rootId !== r.ctx.id) continue;
      c.cancel();
      this.httpCalls.delete(token);
    }
    this.roots.delete(r.ctx.id);
    this.contexts.delete(r.ctx.id);
  }

  // ---- dispatcher ----------------------------------------------------------------------

  /** Dispatcher::post: run `task` later on this thread (never inline). */
  post(task: () => void): void {
    this.tasks.push(task);
    this.drainScheduled ??= setImmediate(() => this.drain());
  }

  private drain(): void {
    this.drainScheduled = undefined;
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

  /**
   * Wasm::setTimerPeriod(root_context_id, period): one timer per root context; 0 stops it. Each
   * period fires proxy_on_tick(root). With `ticks: "manual"` no timer runs: Host.tick() drives them.
   */
  setTickPeriod(rootId: number, ms: number): void {
    const r = this.roots.get(rootId);
    if (r === undefined) return;
    if (r.timer) clearInterval(r.timer);
    r.timer = null;
    r.tickMs = ms;
    if (ms > 0 && !this.failed && this.core.ticks === "timer") {
      r.timer = setInterval(() => this.post(() => this.tickRoot(rootId)), ms);
      r.timer.unref();
    }
  }

  private stopTimers(): void {
    for (const r of this.roots.values()) {
      if (r.timer) clearInterval(r.timer);
      r.timer = null;
    }
  }

  /** Ticks this VM's roots have completed: lets a test wait until every VM has seen a change. */
  ticksDone = 0;

  /** Wasm::tickHandler → ContextBase::onTick: nothing once the VM failed or the root is gone. */
  tickRoot(rootId: number): void {
    const r = this.roots.get(rootId);
    if (r === undefined || r.tickMs === 0 || this.failed) return;
    this.deferred(() => {
      this.call(r.ctx, "proxy_on_tick", rootId);
      this.ticksDone++;
    });
  }

  /** Root contexts with a tick period set, oldest first. */
  tickingRoots(): number[] {
    return [...this.roots.values()].filter((r) => r.tickMs > 0).map((r) => r.ctx.id);
  }

  deliverQueueReady(contextId: number, token: number): void {
    const ctx = this.contexts.get(contextId);
    if (!ctx || this.failed) return;
    this.deferred(() => this.call(ctx, "proxy_on_queue_ready", contextId, token));
  }

  /**
   * Context::onHttpCallSuccess/onHttpCallFailure, delivered on this thread to the root context
   * that made the call (Context::httpCall keeps `this` — exports.cc passes root_context()).
   */
  deliverHttpCallResponse(token: number, response: HttpCallResponse | null): void {
    const entry = this.httpCalls.get(token);
    if (entry === undefined) return;
    const root = this.roots.get(entry.rootId);
    if (!root || this.failed) return;
    const ctx = root.ctx;
    this.deferred(() => {
      if (response === null) {
        this.statusCode = WasmResult.BrokenConnection;
        this.statusMessage = "reset";
        this.addAfterVmCallAction(() => {
          this.statusMessage = "";
          this.httpCalls.delete(token);
        });
        this.call(ctx, "proxy_on_http_call_response", ctx.id, token, 0, 0, 0);
      } else {
        this.httpCallResponse = response;
        this.addAfterVmCallAction(() => {
          this.httpCallResponse = null;
          this.httpCalls.delete(token);
        });
        this.call(
          ctx,
          "proxy_on_http_call_response",
          ctx.id,
          token,
          response.headers.length,
          response.body.length,
          response.trailers.length,
        );
      }
    });
  }

  close(): void {
    this.stopTimers();
    for (const c of this.httpCalls.values()) c.cancel();
    this.httpCalls.clear();
    // A run that never yields to the event loop (the quality bench's virtual time) would otherwise
    // keep every closed thread, its VM and everything it reaches, until the process ends.
    clearImmediate(this.drainScheduled);
    this.drainScheduled = undefined;
    this.tasks.length = 0;
  }
}

/**
 * Starts new VMs of one process (WasmThread.start each: _start, on_vm_start, on_configure) as
 * Envoy's worker threads start theirs when a plugin loads — at the same time, each on its own
 * thread (every worker builds its VM clone and root context in the thread-local slot's
 * initializer, on its own dispatcher). This host runs one call at a time, so it runs them in the
 * schedule that is worst for claims made by read-then-write: each VM's start-up reads shared
 * data as it was before any of them wrote, up to its own first write (SharedDataStore.asIfParallel;
 * Host.tick({ interleaved }) does the same for ticks). A start that fails throws, like
 * WasmThread.start; the VMs started before it stay started. A test hook: createHost starts its
 * VMs one after another.
 */
export function startInParallel(threads: readonly WasmThread[]): void {
  const first = threads[0];
  if (first === undefined) return;
  first.core.sharedData.asIfParallel(threads.map((t) => () => t.start()));
}
