// GET /v1/status: one JSON document with what an operator asks first — which slots exist,
// how loaded and healthy they are, how much of their cache is indexed, whether their KV-event
// streams are flowing, and which gateways are in sync. The dashboard renders this same
// document (pushed over /v1/events/status), so new fields are added, never renamed.

import { buildInfo } from "../common/build-info.ts";
import type { Config } from "../config/schema.ts";
import type { EventsSupervisor } from "../events/index.ts";
import type { PrefixIndex } from "../index/prefix-index.ts";
import type { AdapterCatalog } from "../model/adapter-catalog.ts";
import type { SessionTable } from "../model/session-table.ts";
import type { LoadModel } from "../model/slot-load.ts";
import type { SlotTable } from "../model/slot-table.ts";
import type { PoolTokens } from "../pools/pool-tokens.ts";
import type { PoolSharding } from "../replicas/pool-sharding.ts";
import type { ReplicaExchange } from "../replicas/replica-exchange.ts";
import type { RecentDecisions } from "../reports/recent-decisions.ts";
import { predictedTokens, servedTokens } from "../reports/served-cache.ts";
import type { GatewayRegistry } from "../sync/gateways.ts";
import type { SyncLog } from "../sync/sync-log.ts";
import { outcomeName } from "./outcomes.ts";
import type { ReportStats } from "./report-stats.ts";

export interface StatusInput {
  cfg: Config;
  epoch: bigint;
  log: SyncLog;
  slots: SlotTable;
  load: LoadModel;
  index: PrefixIndex;
  gateways: GatewayRegistry;
  decisions: RecentDecisions;
  poolTokens: Map<string, PoolTokens>;
  events: EventsSupervisor;
  reports: ReportStats;
  /** Null without a `nats` section. */
  replicas?: ReplicaExchange | null;
  /** Null unless `nats.shardPools`. */
  sharding?: PoolSharding | null;
  /** The fleet's session table (its size is a metric); absent in tools without one. */
  sessions?: SessionTable;
  /** LoRA adapters per pool, configured and discovered (absent: the configured ones). */
  adapters?: AdapterCatalog;
}

/** `/v1/status.sharding`: each pool's owner in this replica's view and what moved between replicas. */
function shardingStatus(sh: NonNullable<StatusInput["sharding"]>) {
  return {
    owners: Object.fromEntries(sh.shards.pools.map((p) => [p, sh.shards.ownerOf(p)])),
    owned: sh.shards.owned(),
    replicas: sh.shards.replicas,
    handovers: sh.shards.stats,
    relayed: sh.sink.relayed,
    applied: sh.relayed.stats,
  };
}

export function buildStatus(s: StatusInput) {
  const eventStats = new Map(s.events.stats().map((e) => [e.slotKey, e]));
  const now = Date.now();
  return {
    /** Server clock (epoch ms) when this document was built: ages below are relative to it. */
    now,
    epoch: s.epoch.toString(),
    version: s.log.version,
    /** The running build: package version, git commit (null when unknown), filter module SHA-256. */
    build: buildInfo(),
    /** Report sharing with peer replicas (null without `nats`). */
    replicas: s.replicas == null ? null : { ...s.replicas.status(), stats: s.replicas.stats },
    /**
     * With `nats.shardPools`: each pool's owner in this replica's view, the pools it owns (whose
     * engines it subscribes to), handovers, what it relayed and what it applied of its peers'.
     */
    sharding: s.sharding == null ? null : shardingStatus(s.sharding),
    index: {
      chunks: s.index.chunks.size,
      buckets: s.cfg.cache.buckets,
      ways: s.cfg.cache.ways,
      resets: s.index.resets,
    },
    pools: s.cfg.pools.map((p) => {
      const tokens = s.poolTokens.get(p.name);
      return {
        name: p.name,
        models: p.models,
        /** LoRA adapters routed to this pool, in id order (docs/configuration.md "LoRA adapters"). */
        adapters: s.adapters?.adapters(p.name) ?? p.adapters,
        engine: p.engine,
        dpMode: p.dpMode,
        policy: p.policy,
        segmentable: tokens?.segmentTemplate != null,
        indexed: tokens?.detokenize != null,
        problems: tokens?.problems ?? [],
        notes: tokens?.notes ?? [],
      };
    }),
    slots: s.slots.all().map((slot) => {
      const load = s.load.get(slot.id);
      const blocks = s.index.slot(slot.key);
      const ev = eventStats.get(slot.key);
      return {
        id: slot.id,
        key: slot.key,
        pool: slot.pool,
        address: slot.address,
        globalRank: slot.globalRank,
        headerRank: slot.headerRank,
        role: slot.role,
        workerId: slot.workerId?.toString() ?? null,
        present: slot.present,
        healthy: load.healthy && slot.present,
        load: {
          running: load.running,
          waiting: load.waiting,
          kvUsage: load.kvUsage,
          inflight: load.inflight,
          ttftMs: Math.round(load.ttftMs),
          /** The engine's active adapters and max_loras (vllm:lora_requests_info); null: none reported. */
          lora: load.lora,
        },
        index: blocks === undefined ? null : { ...blocks.stats, blocks: blocks.blockCount },
        /**
         * From gateway reports: requests finished on this slot, their recent cached ratio, and
         * predicted vs served cached tokens (`served`, reports/served-cache.ts).
         */
        recent: s.reports.slots.get(slot.id) ?? null,
        events:
          ev === undefined
            ? null
            : {
                endpoint: ev.endpoint,
                lastSeq: ev.lastSeq,
                lagMs: ev.lastMessageAt === null ? null : now - ev.lastMessageAt,
                batches: ev.batches,
                gaps: ev.gaps,
                replays: ev.replays,
                resets: ev.resets,
                dropped: ev.dropped,
                missedBatches: ev.missedBatches,
                replaying: ev.replaying,
              },
      };
    }),
    gateways: s.gateways.list().map((g) => ({ ...g, behind: s.log.version - g.version })),
    recentDecisions: s.decisions
      .list()
      .slice(0, 50)
      .map((d) => {
        const slot = s.slots.get(d.slot);
        const detailsSeen = s.reports.slots.get(d.slot)?.served.detailsSeen ?? false;
        return {
          ...d,
          pool: slot?.pool ?? null,
          slotKey: slot?.key ?? null,
          outcomeName: outcomeName(d.outcome),
          cachedRatio: d.promptBytes > 0 ? Math.min(1, d.cachedBytes / d.promptBytes) : 0,
          /** Estimated tokens of the predicted cached prefix (cachedBytes). */
          predictedCachedTokens: predictedTokens(d.cachedBytes),
          /** Tokens the engine served from its cache; null when it did not say. */
          served: servedTokens(d, detailsSeen),
        };
      }),
    reports: { accepted: s.reports.accepted, rejected: s.reports.rejected },
    hitRate: s.reports.hitRate.snapshot(now),
  };
}
