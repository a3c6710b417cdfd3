// Per-VM state shared by the root contexts and the HTTP contexts of one worker thread: the plugin
// configuration of the stream being served, the reusable request hasher, walker and decider, this
// thread's in-flight counts, its report outbox and the report queue token. A VM can hold several
// root contexts (a config update adds one); what belongs to one of them lives in KvrouteRoot.
import { ByteBuf } from "../core/byte-buf";
import { PluginConfig } from "../core/plugin-config";
import { PrefixWalk } from "../core/prefix-walk";
import { RequestHasher } from "../core/request-hash";
import { Decider } from "../core/route-decision";
import { ReportOutbox } from "./report-queue";
import { KvrouteStream } from "./stream";

export class VmState {
  /** The configuration of the root context whose stream (or tick) is running now. */
  config: PluginConfig = new PluginConfig();
  /** This VM's index in the `kvr.if.<t>` key space: claimed once per VM, -1 before. */
  thread: i32 = -1;
  /** Token of the shared queue the leader drains for reports; 0 when unavailable. */
  reportQueue: u32 = 0;
  hasher: RequestHasher = new RequestHasher();
  walker: PrefixWalk = new PrefixWalk(256, 4);
  decider: Decider = new Decider(0);
  buckets: ByteBuf = new ByteBuf(1024);
  /** Requests this thread sent per slot and has not seen finish. */
  inflight: StaticArray<u32> = new StaticArray<u32>(256);
  message: ByteBuf = new ByteBuf(64);
  /** Report records waiting for this VM's next batch to the leader. */
  outbox: ReportOutbox = new ReportOutbox();
  /** Live HTTP contexts of this VM by context id. */
  streams: Map<u32, KvrouteStream> = new Map();
  /** Each live stream's configuration: its root context's (read while the VM has several). */
  streamConfigs: Map<u32, PluginConfig> = new Map();
  /** Streams holding their headers while waiting for the body, with the time they started. */
  waiting: Map<u32, u64> = new Map();
  /** Whether the missing allow_on_headers_stop_iteration was already reported. */
  warnedNoBody: bool = false;

  /** The configuration stream `id` runs with. */
  configOf(id: u32, fallback: PluginConfig): PluginConfig {
    return this.streamConfigs.has(id) ? this.streamConfigs.get(id) : fallback;
  }

  @inline inflightAdd(slot: i32, delta: i32): void {
    if (slot < 0) return;
    if (slot >= this.inflight.length) {
      const grown = new StaticArray<u32>(slot + 64);
      for (let i = 0; i < this.inflight.length; i++) grown[i] = this.inflight[i];
      this.inflight = grown;
    }
    const v = <i64>this.inflight[slot] + <i64>delta;
    this.inflight[slot] = v < 0 ? 0 : <u32>v;
  }
}

export const vm = new VmState();
