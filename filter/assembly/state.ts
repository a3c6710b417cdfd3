// Per-VM state shared by the root contexts and the HTTP contexts of one worker thread: the plugin
// configuration of the stream being served, the reusable request hasher, walker and decider, this
// thread's unanswered requests (queued-work.ts), its report outbox and the report queue token. A
// VM can hold several root contexts (a config update adds one); what belongs to one of them lives
// in KvrouteRoot.
import { ByteBuf } from "../core/byte-buf";
import { LoadImage } from "../core/cache-images";
import { AdapterMatch, LoraAffinity } from "../core/lora-affinity";
import { PluginConfig } from "../core/plugin-config";
import { PrefixWalk } from "../core/prefix-walk";
import { LocalQueue, loadSignature } from "../core/queued-work";
import { RequestHasher } from "../core/request-hash";
import { RouteCells } from "../core/route-cells";
import { Decider } from "../core/route-decision";
import { CachedBuckets } from "./bucket-cache";
import { FleetSessions } from "./fleet-sessions";
import { GatewayBoard } from "./gateway-board";
import { inflightFreshMs } from "./inflight-keys";
import { ReportOutbox } from "./report-queue";
import { SessionTable } from "./session";
import { Speculation } from "./speculation";
import { ThreadSlot } from "./thread-slot";

export class VmState {
  /** The configuration of the root context whose stream (or tick) is running now. */
  config: PluginConfig = new PluginConfig();
  /** This VM's slot in the `kvr.un.<t>` key space and its lease on it (thread-slot.ts). */
  slot: ThreadSlot = new ThreadSlot();
  /** Token of the shared queue the leader drains for reports; 0 when unavailable. */
  reportQueue: u32 = 0;
  hasher: RequestHasher = new RequestHasher();
  walker: PrefixWalk = new PrefixWalk(256, 4);
  /** Reseeded once per VM by its first root context (root.ts). */
  decider: Decider = new Decider(0);
  seeded: bool = false;
  buckets: ByteBuf = new ByteBuf(1024);
  /** Requests this thread sent per slot and not yet answered, and which the engines do not show yet (queued-work.ts). */
  queue: LocalQueue = new LocalQueue();
  /** Decisions taken while the gateway had nothing unanswered (each gets its own slot order). */
  idleDecisions: u32 = 0;
  /** Streamed answers this VM saw with the scan on: every usageScanStreamSample-th one is read. */
  streamedAnswers: u32 = 0;
  message: ByteBuf = new ByteBuf(64);
  /** The current request's LoRA adapter, and this thread's adapter affinity (lora-affinity.ts). */
  adapter: AdapterMatch = new AdapterMatch();
  lora: LoraAffinity = new LoraAffinity();
  /** Report records waiting for this VM's next batch to the leader. */
  outbox: ReportOutbox = new ReportOutbox();
  /** The prefix-index buckets as this VM last read them, and its reader of the fleet's sessions. */
  bucketCache: CachedBuckets = new CachedBuckets();
  fleetSessions: FleetSessions = new FleetSessions();
  private speculativeCells: RouteCells = new RouteCells();
  private sessionCells: RouteCells = new RouteCells();
  /** The gateway board (gateway-board.ts): what this gateway's VMs tell each other. */
  board: GatewayBoard = new GatewayBoard(
    this.bucketCache,
    this.speculativeCells,
    this.sessionCells,
    this.lora,
  );
  /** This gateway's recent speculative routes and sessions; new ones go out with the next board write. */
  speculation: Speculation = new Speculation(this.speculativeCells, this.board.edit.routes);
  sessions: SessionTable = new SessionTable(this.sessionCells, this.fleetSessions, this.board.edit.routes);
  /** Each live stream's configuration: its root context's (read while the VM has several). */
  streamConfigs: Map<u32, PluginConfig> = new Map();
  /** Streams holding their headers while waiting for the body, with the time they started. */
  waiting: Map<u32, u64> = new Map();
  private observedLoad: LoadImage | null = null;
  private observedSlots: i32 = 0;
  /** Whether the missing allow_on_headers_stop_iteration was already reported. */
  warnedNoBody: bool = false;
  /**
   * Configurations (root contexts) whose streams were seen getting body data while their
   * headers waited: Envoy runs them with allow_on_headers_stop_iteration, so a body that is slow
   * to come is a slow upload, not a body Envoy withholds, and is waited for (Envoy's stream idle
   * timeout bounds the wait). Per configuration: the flag is a plugin setting, and two plugins
   * can share one VM.
   */
  bodiesReachWaitingHeaders: Set<PluginConfig> = new Set();

  /** This VM's index in the `kvr.un.<t>` key space: -1 while it holds none. */
  get thread(): i32 {
    return this.slot.index;
  }

  /** The configuration stream `id` runs with. */
  configOf(id: u32, fallback: PluginConfig): PluginConfig {
    return this.streamConfigs.has(id) ? this.streamConfigs.get(id) : fallback;
  }

  /** How long a VM's section on the board counts after its stamp (it stopped writing: it failed or stalls). */
  get freshMs(): u64 {
    return inflightFreshMs(this.config.tickMs);
  }

  /** The board's news (one shared-data read): before a decision, and before every write. */
  readBoard(now: u64): void {
    // The clock the queue's token counts are aged to (decisions read them; writes publish them).
    this.queue.nowMs = <f64>now;
    this.board.refresh(this.thread, this.queue, this.freshMs, now);
  }

  /**
   * This VM's requests and records onto the board (one write over the last read). Its section
   * only while its lease on slot t is unexpired: once it lapsed another VM may hold t.
   */
  writeBoard(now: u64): bool {
    this.queue.nowMs = <f64>now;
    return this.board.publish(this.slot.holds(now) ? this.thread : -1, this.queue, this.freshMs, now);
  }

  /** A change the other VMs must see at once (a request ended): read, then write. */
  publishNow(now: u64): bool {
    this.readBoard(now);
    return this.writeBoard(now);
  }

  /**
   * A request ended: published at once when the other VMs would see a difference, else nothing to
   * do — an answered request the engine's metrics show already left every count on the board, so
   * neither a read nor a write (docs/wire-format.md §4.5).
   */
  publishEnd(now: u64): void {
    if (this.board.wouldChange(this.slot.holds(now) ? this.thread : -1, this.queue)) this.publishNow(now);
  }

  /** kvr.load as this VM has it now: requests the engines' metrics show are no longer unseen. */
  observeLoad(load: LoadImage | null): void {
    if (load === null) return;
    const q = this.queue;
    // Once per image (and per growth of the queue's slots): observing the same image again
    // changes nothing, and a decision must not walk every slot for nothing.
    if (load === this.observedLoad && q.slots === this.observedSlots) return;
    this.observedLoad = load;
    this.observedSlots = q.slots;
    q.observeAdmission(load);
    for (let s = 0; s < q.slots; s++) q.observe(s, loadSignature(load, s));
  }
}

export const vm = new VmState();
