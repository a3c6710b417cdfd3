// A root context: its plugin configuration, and on ticks the cache refresh, this VM's in-flight
// counts and report batch, and — on the one root of the process that holds the lease — the sync
// long-poll and the reports (DESIGN §4; sync.ts, reporter.ts). A VM has one root context per
// plugin configuration (a config update adds one); only the newest (the primary) does the VM's
// chores and may lead.
import * as imports from "@gcoredev/proxy-wasm-sdk-as/assembly/imports";
import { PluginConfig, parsePluginConfig, pluginConfigError } from "../core/plugin-config";
import { Decider } from "../core/route-decision";
import { xxh64 } from "../core/xxh64";
import { cache } from "./cache-view";
import {
  getBuffer,
  getProperty,
  LOG_ERROR,
  LOG_INFO,
  log,
  nowMs,
  OK,
  PLUGIN_CONFIGURATION,
  setTickMs,
} from "./host";
import { Leadership } from "./leader";
import { stats } from "./metrics";
import { Reporter } from "./reporter";
import { vm } from "./state";
import { streams } from "./streams";
import { SyncPoller } from "./sync";
import { threadLeaseMs } from "./thread-slot";

const REPORT_QUEUE = "kvr.reports";

export class KvrouteRoot {
  config: PluginConfig = new PluginConfig();
  /** on_configure accepted this root's configuration. */
  configured: bool = false;
  private leadership: Leadership = new Leadership(0, 1000);
  private sync: SyncPoller = new SyncPoller();
  private reporter: Reporter = new Reporter();
  private gateway: string = "";

  constructor(readonly id: u32) {}

  configure(size: u32): bool {
    const raw = size === 0 ? new ArrayBuffer(0) : getBuffer(PLUGIN_CONFIGURATION, 0, size);
    if (raw === null) {
      log(LOG_ERROR, "kvroute: the plugin configuration cannot be read");
      return false;
    }
    const cfg = parsePluginConfig(changetype<usize>(raw), raw.byteLength);
    if (cfg === null) {
      log(LOG_ERROR, `kvroute: invalid plugin configuration: ${pluginConfigError}`);
      return false;
    }
    this.config = cfg;
    vm.config = cfg;
    stats.define();
    // One slot per VM: a second root context of this VM publishes the same counts under it. The
    // VMs of all worker threads configure at once: the claim is race-free and reuses the slots
    // of dead VMs (thread-slot.ts).
    if (vm.thread < 0) vm.slot.claim(nowMs(), threadLeaseMs(cfg.tickMs));
    // Registering again keeps the token; delivery moves to this root (nothing here needs it).
    vm.reportQueue = register();
    const node = getProperty("node\0id");
    this.gateway =
      cfg.gatewayId.length > 0
        ? cfg.gatewayId
        : node !== null && node.byteLength > 0
          ? String.UTF8.decode(node)
          : "envoy";
    // Unique per root context of this process: thread slot, context id and the clock.
    const me = ((<u64>vm.thread) << 48) ^ ((<u64>this.id) << 32) ^ nowMs();
    // Every VM samples and breaks ties with its own sequence: with one seed for all, the threads
    // and gateways that share a stale view of the load would all pick alike. A configured seed
    // trades that for reproducible decisions (reseeded whenever a configuration sets one).
    if (cfg.seed !== 0) {
      vm.decider = new Decider(<u64>cfg.seed);
      vm.seeded = true;
    } else if (!vm.seeded) {
      vm.decider = new Decider(me ^ 0x9e3779b97f4a7c15);
      vm.seeded = true;
    }
    // A configured seed asks for reproducible decisions: then no gateway order either (it would
    // differ by gateway id and by when each process read its load images).
    vm.decider.gatewaySeed = cfg.seed !== 0 ? 0 : gatewaySeedOf(this.gateway);
    cache.setGateway(vm.decider.gatewaySeed);
    const leaseMs = <u64>(cfg.tickMs * 3 > 1000 ? cfg.tickMs * 3 : 1000);
    this.leadership = new Leadership(me === 0 ? 1 : me, leaseMs);
    setTickMs(cfg.tickMs);
    cache.refresh();
    log(
      LOG_INFO,
      `kvroute: configured root ${this.id} (thread slot ${vm.thread}, control plane cluster ${cfg.cluster})`,
    );
    return true;
  }

  get leads(): bool {
    return this.leadership.held;
  }

  /** `primary`: this is the VM's newest root context (the others only finish their streams). */
  tick(primary: bool): void {
    const now = nowMs();
    if (!primary) {
      this.leadership.release();
      return;
    }
    vm.config = this.config;
    cache.refresh();
    vm.observeLoad(cache.load);
    this.rescueWaitingStreams(now);
    // Renews this VM's slot lease (or claims a slot) before publishing under it.
    vm.slot.keep(now, threadLeaseMs(this.config.tickMs));
    vm.outbox.flush(vm.reportQueue);
    const leader = this.leadership.tick(now);
    // Process-wide gauge, written by every thread's tick: is there a live leader?
    stats.record(stats.syncLeader, leader || this.leadership.otherLive ? 1 : 0);
    // The board: the other VMs' news in, this VM's requests (stamped: it is alive) and the
    // leader's reported share out — one read and one write per tick.
    vm.readBoard(now);
    if (leader) {
      this.sync.maybeStart(this.config, this.gateway, now);
      this.reporter.maybeSend(this.config, this.gateway, vm.reportQueue, now);
    }
    vm.writeBoard(now);
  }

  /** proxy_on_done: this configuration is gone; let another root lead at once. */
  done(): void {
    this.leadership.release();
  }

  /**
   * Streams still waiting for a body after two ticks: see KvrouteStream.routeWithoutBody. Not
   * once this configuration's bodies were seen reaching waiting headers (the flag is on).
   */
  private rescueWaitingStreams(now: u64): void {
    const waiting = vm.waiting;
    if (waiting.size === 0) return;
    const ids = waiting.keys();
    const limit = <u64>vm.config.tickMs * 2;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (waiting.get(id) + limit > now) continue;
      if (!streams.has(id) || vm.bodiesReachWaitingHeaders.has(vm.configOf(id, this.config))) {
        waiting.delete(id);
        continue;
      }
      if (!vm.warnedNoBody) {
        vm.warnedNoBody = true;
        log(
          LOG_ERROR,
          "kvroute: request bodies never reach the filter while headers wait: set allow_on_headers_stop_iteration: true in the Wasm plugin config (Envoy >= 1.35). Routing by load only until then.",
        );
      }
      stats.inc(stats.noBodyAccess);
      imports.proxy_set_effective_context(id);
      vm.config = vm.configOf(id, this.config);
      streams.get(id).routeWithoutBody();
      imports.proxy_continue_stream(0);
    }
    vm.config = this.config;
    imports.proxy_set_effective_context(this.id);
  }

  /** An http-call answer for this root context: its poll's or its report's. */
  httpResponse(token: u32, bodySize: u32): void {
    if (token === 0) return;
    if (token === this.sync.token)
      this.sync.onResponse(this.config, this.gateway, bodySize, this.leadership, this.id);
    else if (token === this.reporter.token) this.reporter.onResponse();
  }
}

function register(): u32 {
  const name = String.UTF8.encode(REPORT_QUEUE);
  const out = memory.data(4);
  return imports.proxy_register_shared_queue(changetype<usize>(name), name.byteLength, out) === OK
    ? load<u32>(out)
    : 0;
}

/** The gateway's slot-order seed (route-decision.ts gatewaySeed): XXH64 of its id, never 0. */
function gatewaySeedOf(id: string): u64 {
  const b = String.UTF8.encode(id);
  const h = xxh64(changetype<usize>(b), <usize>b.byteLength, 0x4741544557415953);
  return h === 0 ? 1 : h;
}
