// The filter's Envoy stats (docs/operations.md "Filter stats"). Envoy keeps Wasm stats in the
// `wasmcustom` namespace and its Prometheus output strips it: kvroute.requests.prefix_hit is
// scraped as kvroute_requests_prefix_hit.
import { CfgImage } from "../core/cache-images";
import { PRIORITY_NAMES } from "../core/priority";
import { defineMetric, incrementMetric, recordMetric } from "./host";

const COUNTER: u32 = 0;
const GAUGE: u32 = 1;
const HISTOGRAM: u32 = 2;

export class Stats {
  prefixHit: u32 = 0;
  loadOnly: u32 = 0;
  speculativeHit: u32 = 0;
  pinned: u32 = 0;
  rejected: u32 = 0;
  untrustedPin: u32 = 0;
  shed: u32 = 0;
  priorityInvalid: u32 = 0;
  priorityUntrusted: u32 = 0;
  failOpen: u32 = 0;
  failClosed: u32 = 0;
  noPool: u32 = 0;
  parseErrors: u32 = 0;
  bodyTooLarge: u32 = 0;
  noBodyAccess: u32 = 0;
  upstreamFailures: u32 = 0;
  servedElsewhere: u32 = 0;
  servedUnknown: u32 = 0;
  syncErrors: u32 = 0;
  syncResets: u32 = 0;
  syncVersion: u32 = 0;
  syncLeader: u32 = 0;
  reportsDropped: u32 = 0;
  sessionKept: u32 = 0;
  sessionMoved: u32 = 0;
  sessionNew: u32 = 0;
  sessionInvalid: u32 = 0;
  cachedRatio: u32 = 0;
  decisionUs: u32 = 0;
  private shedCfg: CfgImage | null = null;
  private shedIds: StaticArray<u32> = new StaticArray<u32>(0);

  /** Defines every stat (process-wide by name, so every thread gets the same ids). */
  define(): void {
    this.prefixHit = defineMetric(COUNTER, "kvroute.requests.prefix_hit");
    this.loadOnly = defineMetric(COUNTER, "kvroute.requests.load_only");
    this.speculativeHit = defineMetric(COUNTER, "kvroute.requests.speculative_hit");
    this.pinned = defineMetric(COUNTER, "kvroute.requests.pinned");
    this.rejected = defineMetric(COUNTER, "kvroute.requests.rejected");
    this.untrustedPin = defineMetric(COUNTER, "kvroute.requests.untrusted_pin");
    this.shed = defineMetric(COUNTER, "kvroute.requests.shed");
    this.priorityInvalid = defineMetric(COUNTER, "kvroute.priority.invalid");
    this.priorityUntrusted = defineMetric(COUNTER, "kvroute.priority.untrusted");
    this.failOpen = defineMetric(COUNTER, "kvroute.requests.fail_open");
    this.failClosed = defineMetric(COUNTER, "kvroute.requests.fail_closed");
    this.noPool = defineMetric(COUNTER, "kvroute.requests.no_pool");
    this.parseErrors = defineMetric(COUNTER, "kvroute.parse_errors");
    this.bodyTooLarge = defineMetric(COUNTER, "kvroute.body_too_large");
    this.noBodyAccess = defineMetric(COUNTER, "kvroute.requests.no_body_access");
    this.upstreamFailures = defineMetric(COUNTER, "kvroute.upstream_failures");
    this.servedElsewhere = defineMetric(COUNTER, "kvroute.requests.served_elsewhere");
    this.servedUnknown = defineMetric(COUNTER, "kvroute.requests.served_unknown");
    this.syncErrors = defineMetric(COUNTER, "kvroute.sync.errors");
    this.syncResets = defineMetric(COUNTER, "kvroute.sync.resets");
    this.syncVersion = defineMetric(GAUGE, "kvroute.sync.version");
    this.syncLeader = defineMetric(GAUGE, "kvroute.sync.leader");
    this.reportsDropped = defineMetric(COUNTER, "kvroute.reports.dropped");
    this.sessionKept = defineMetric(COUNTER, "kvroute.session.kept");
    this.sessionMoved = defineMetric(COUNTER, "kvroute.session.moved");
    this.sessionNew = defineMetric(COUNTER, "kvroute.session.new");
    this.sessionInvalid = defineMetric(COUNTER, "kvroute.session.invalid");
    this.cachedRatio = defineMetric(HISTOGRAM, "kvroute.cached_ratio_permille");
    this.decisionUs = defineMetric(HISTOGRAM, "kvroute.decision_us");
  }

  /**
   * kvroute.shed.<pool>.<priority>: shed requests per pool and priority, defined on first use per
   * configuration (pool names come from it), so a shed costs one lookup after the first.
   */
  shedBy(cfg: CfgImage, pool: i32, priority: i32): void {
    if (this.shedCfg !== cfg) {
      this.shedCfg = cfg;
      this.shedIds = new StaticArray<u32>(cfg.pools.length * PRIORITY_NAMES.length);
    }
    if (pool < 0 || pool >= cfg.pools.length || priority < 0 || priority >= PRIORITY_NAMES.length) return;
    const i = pool * PRIORITY_NAMES.length + priority;
    if (this.shedIds[i] === 0)
      this.shedIds[i] = defineMetric(
        COUNTER,
        `kvroute.shed.${cfg.pools[pool].name}.${PRIORITY_NAMES[priority]}`,
      );
    incrementMetric(this.shedIds[i], 1);
  }

  @inline inc(id: u32): void {
    incrementMetric(id, 1);
  }

  @inline add(id: u32, n: i64): void {
    incrementMetric(id, n);
  }

  @inline record(id: u32, v: u64): void {
    recordMetric(id, v);
  }
}

export const stats = new Stats();
