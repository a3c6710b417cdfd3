// kvroute itself: the routing core's decision (filter/core through the Wasm loader,
// control-plane/src/core/route-core.ts) over the images the real control plane publishes
// (sim-control-plane.ts). Nothing of the scoring is re-implemented here: the harness only moves
// bytes as Envoy's shared data would —
// - KV events reach the index `kvEventDelayMs` after the engine published them;
// - load (running, waiting, KV usage, fleet in-flight) is republished every scrape interval
//   (the control plane's default 250 ms);
// - the gateway's in-flight count per slot reaches the control plane with each load refresh (its
//   report); requests it sent since then are the core's "local in-flight" (setLocalInflight:
//   sent but not yet counted by the control plane), as the filter keeps them in shared data;
// - the chosen slot's chunk hashes become speculative entries at once (the filter writes them
//   right after routing, DESIGN §3; here through the control plane's speculate path, which puts
//   them in the same bucket images), so a burst of one prefix sticks before events arrive.
import { readFileSync } from "node:fs";
import { type RouteDecision, RoutingCore } from "../../../control-plane/src/core/route-core.ts";
import { SimControlPlane } from "../kvroute/sim-control-plane.ts";
import type { PolicyFactory, RoutingPolicy } from "./types.ts";

/** Read once per process, so every run of a bench uses the same core build even if build/ changes meanwhile. */
let coreWasm: Uint8Array | undefined;
const CORE_WASM = new URL("../../../build/kvroute-core.wasm", import.meta.url);

export interface KvrouteOptions {
  workers: number;
  ranksPerWorker: number;
  speculative: boolean;
  /** Overrides of the config's `routing` section (weights, temperature). */
  routing?: Record<string, unknown>;
  /** Overrides of the config's `load` section (scrapeIntervalMs). */
  load?: Record<string, unknown>;
  /** Overrides the bench-wide KV event delay (sensitivity runs). */
  kvEventDelayMs?: number;
}

/** Decisions by outcome, for the report (how often the core saw a cached prefix). */
export interface KvrouteStats {
  outcomes: Map<string, number>;
}

export function kvroutePolicy(o: KvrouteOptions, name = "kvroute", stats?: KvrouteStats): PolicyFactory {
  return {
    name,
    describe:
      "kvroute: routing core (Wasm) over the control plane's bucket/load images; KV events via the real index " +
      `${o.kvEventDelayMs === undefined ? "with the configured delay" : `${o.kvEventDelayMs} ms late`}; load every ${o.load?.scrapeIntervalMs ?? 250} ms; speculative entries ` +
      `${o.speculative ? "on" : "off"}${o.routing === undefined ? "" : `; routing ${JSON.stringify(o.routing)}`}`,
    create(ctx): RoutingPolicy {
      const cp = new SimControlPlane({
        workers: o.workers,
        ranksPerWorker: o.ranksPerWorker,
        kvEventDelayMs: o.kvEventDelayMs ?? ctx.kvEventDelayMs,
        routing: o.routing,
        load: o.load,
      });
      coreWasm ??= readFileSync(CORE_WASM);
      const core = new RoutingCore(coreWasm);
      core.setImages(cp.images());
      const scrapeMs = cp.cfg.load.scrapeIntervalMs;
      let scrapedMs = Number.NEGATIVE_INFINITY;
      const inflight = new Array<number>(ctx.ranks).fill(0);
      const sinceReport = new Array<number>(ctx.ranks).fill(0);
      const bucket = (i: number) => cp.bucket(i);
      return {
        kvEvents: (rank, events, atMs) => cp.publish(rank, events, atMs),
        tick(now, loads) {
          if (now - scrapedMs < scrapeMs) return;
          scrapedMs = now;
          cp.scrape(now, loads, inflight);
          sinceReport.fill(0);
          core.setImages({ load: cp.images().load });
        },
        choose(view, request) {
          cp.advance(view.nowMs);
          for (let r = 0; r < ctx.ranks; r++) {
            const slot = cp.slotOfRank[r];
            if (slot !== undefined) core.setLocalInflight(slot.id, sinceReport[r] as number);
          }
          const d: RouteDecision = core.route(request.body, "chat", bucket);
          const slot = cp.slots.get(d.slot);
          if (slot === undefined)
            throw new Error(`kvroute returned no slot (${d.outcome}) for ${request.id}`);
          const rank = slot.globalRank;
          stats?.outcomes.set(d.outcome, (stats.outcomes.get(d.outcome) ?? 0) + 1);
          if (o.speculative) cp.speculate(d.chunkHashes, rank, view.nowMs);
          inflight[rank] = (inflight[rank] as number) + 1;
          sinceReport[rank] = (sinceReport[rank] as number) + 1;
          return rank;
        },
        done(result) {
          inflight[result.rank] = Math.max(0, (inflight[result.rank] as number) - 1);
        },
      };
    },
  };
}
