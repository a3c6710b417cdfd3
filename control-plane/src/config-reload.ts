// A configuration reload (a changed ConfigMap, SIGHUP): validate the new file with the same
// parser as at start, apply the fields that can change live (config/live-change.ts) by
// publishing a new `kvr.cfg` — gateways, the index and the epoch stay — and keep every other
// field at its running value, saying which and why in the log and in metrics. Any error keeps the
// old configuration whole.
import type { Logger } from "pino";
import { liveChange } from "./config/live-change.ts";
import { parseConfig } from "./config/load-config.ts";
import type { ReloadResult, ReloadStats } from "./config/reload-stats.ts";
import type { Config, PoolConfig } from "./config/schema.ts";

export interface ReloadParts {
  /** The configuration the control plane runs; the reload replaces `cfg` in place. */
  live: { cfg: Config };
  /** Publishes `kvr.cfg` from live.cfg. */
  publishCfg(): void;
  /**
   * A static pool's endpoints changed: hands them to the fleet as discovery would. Unset: static
   * endpoints need a restart (the control plane runs a discovery of its own).
   */
  endpointsChanged?(pool: PoolConfig): void;
  logger: Logger;
  stats: ReloadStats;
}

export function reloadConfig(parts: ReloadParts, load: () => Config): ReloadResult {
  const { live, logger, stats } = parts;
  let next: Config;
  try {
    next = load();
  } catch (err) {
    stats.count("invalid");
    logger.error(
      { err: (err as Error).message },
      "configuration reload failed: the running configuration is kept",
    );
    return "invalid";
  }
  const change = liveChange(live.cfg, next, { staticEndpoints: parts.endpointsChanged !== undefined });
  try {
    // The new live fields next to the running restart-only ones must still make a valid whole
    // (e.g. a new sessionHeader equal to the priorityHeader that still runs).
    parseConfig(change.running, "the running configuration with the new live fields", {});
  } catch (err) {
    stats.count("invalid");
    logger.error(
      { err: (err as Error).message, refused: change.refused },
      "configuration reload failed: its live fields conflict with fields that change only on a restart; the running configuration is kept",
    );
    return "invalid";
  }
  stats.restartPending = change.refused;
  const result: ReloadResult =
    change.applied.length === 0
      ? change.refused.length === 0
        ? "unchanged"
        : "refused"
      : change.refused.length === 0
        ? "applied"
        : "partly_applied";
  if (change.applied.length > 0) {
    live.cfg = change.running;
    logger.level = change.running.logLevel;
    change.running.pools.forEach((pool, i) => {
      if (change.applied.some((p) => p.startsWith(`pools[${i}].endpoints`))) parts.endpointsChanged?.(pool);
    });
    if (change.applied.some((p) => p !== "logLevel")) parts.publishCfg();
    stats.lastAppliedMs = Date.now();
    logger.info({ applied: change.applied }, "configuration reloaded");
  }
  if (change.refused.length > 0)
    logger.warn(
      { refused: change.refused },
      "configuration reload: these fields change only on a restart; their running values are kept",
    );
  stats.count(result);
  return result;
}
