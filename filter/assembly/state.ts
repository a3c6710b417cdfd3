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
import { Decider } from "../core/route-decision";
import { SharedValue } from "./host";
import { refreshGatewayView, writeUnseen } from "./inflight-keys";
import { ReportOutbox } from "./report-queue";
import { KvrouteStream } from "./stream";
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
  message: ByteBuf = new ByteBuf(64);
  /** The current request's LoRA adapter, and this thread's adapter affinity (lora-affinity.ts). */
  adapter: AdapterMatch = new AdapterMatch();
  lora: LoraAffinity = new LoraAffinity();
  /** Report records waiting for this VM's next batch to the leader. */
  outbox: ReportOutbox = new ReportOutbox();
  /** Live HTTP contexts of this VM by context id. */
  streams: Map<u32, KvrouteStream> = new Map();
  /** Each live stream's configuration: its root context's (read while the VM has several). */
  streamConfigs: Map<u32, PluginConfig> = new Map();
  /** Streams holding their headers while waiting for the body, with the time they started. */
  waiting: Map<u32, u64> = new Map();
  private unseenOut: ByteBuf = new ByteBuf(256);
  private siblingsRead: SharedValue = new SharedValue();
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

  /**
   * This VM's requests into kvr.un.<t>: after every change, so the other VMs decide with them.
   * Only while its lease on slot t is unexpired: once it lapsed another VM may hold t.
   */
  publishQueue(now: u64): void {
    if (this.slot.holds(now)) writeUnseen(this.slot.index, this.queue, now, this.unseenOut);
  }

  /** The other VMs' requests (kvr.un.<t>) and the leader's reported share (kvr.ifr), before a decision. */
  readGateway(now: u64): void {
    refreshGatewayView(this.queue, this.thread, this.siblingsRead, this.config.tickMs, now);
  }

  /** kvr.load as this VM has it now: requests the engines' metrics show are no longer unseen. */
  observeLoad(load: LoadImage | null): void {
    if (load === null) return;
    const q = this.queue;
    for (let s = 0; s < q.slots; s++) q.observe(s, loadSignature(load, s));
  }
}

export const vm = new VmState();
