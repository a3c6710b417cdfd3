// Overload shedding and priority (docs/configuration.md "Overload shedding"): what happens to the
// TTFT of critical traffic when requests arrive faster than the fleet can serve them, with the
// pool's shedding off (every request queues at the engines) and on (standard and sheddable
// requests are answered 429 once every slot is saturated; critical ones are never shed).
//
// The quality bench's pieces, in virtual time: the simulated vLLM fleet (control-plane/sim), the
// shipped build/kvroute.wasm in the Node Proxy-Wasm host as gateways synced from kvroute's control
// plane (bench/quality/kvroute/*), unique prompts (no prefix sharing: load is the only thing that
// matters). The loop is the quality harness's, except that a request the gateway answered itself
// (429) never reaches an engine — the harness submits every arrival. Each arrival's priority comes
// in the x-kvroute-priority header from a trusted client (the bench's gateway source address is in
// routing.rankHeaderPolicy.trustedCidrs, so `critical` is honored).
//   tsx bench/shedding.bench.ts [--quick] [--seed=N]
import { readFileSync } from "node:fs";
import { createSimCluster, type SimRequestResult } from "../control-plane/sim/virtual-cluster.ts";
import { resultsDir, writeResult } from "./lib/results.ts";
import { VirtualControlPlane } from "./quality/kvroute/virtual-control-plane.ts";
import { CONTROL_PLANE_CLUSTER, VirtualGateway } from "./quality/kvroute/virtual-gateway.ts";
import { VirtualTimers } from "./quality/kvroute/virtual-timers.ts";
import { assertSynced, rankOf } from "./quality/policies/kvroute.ts";
import { benchTokenizer } from "./quality/tokens.ts";
import { noSharing } from "./quality/workloads/no-sharing.ts";
import type { Arrival } from "./quality/workloads/types.ts";

const QUICK = process.argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";
const SEED = Number(process.argv.find((a) => a.startsWith("--seed="))?.slice(7) ?? 1);
const WASM = new URL("../build/kvroute.wasm", import.meta.url);

// The fleet: one worker with 2 DP ranks (vLLM hybrid LB), the quality bench's engine limits; long
// prompts, so a few dozen requests per second overload it (a small run in wall time).
const WORKERS = 1;
const RANKS = 2;
const BLOCK = 16;
const PROMPT_TOKENS = 4096;
const OUTPUT_TOKENS = 64;
/** Offered load: arrival rates in requests/s, the first below capacity, the others above it. */
const RATES = QUICK ? [15, 45] : [15, 30, 45];
/** Virtual seconds of arrivals per run. */
const SECONDS = QUICK ? 10 : 15;
/** Shares of the traffic by priority (the rest is standard). */
const CRITICAL_SHARE = 0.2;
const SHEDDABLE_SHARE = 0.2;
const SHEDDING = {
  enabled: true,
  retryAfterSeconds: 1,
  standard: { maxQueued: 8, maxKvUsage: 0.95 },
  sheddable: { maxQueued: 2, maxKvUsage: 0.85 },
};
const TRUSTED = { rankHeaderPolicy: { trustedCidrs: ["10.1.0.0/16"] } };
/** As bench/quality/policies/kvroute.ts: Envoy's clock at virtual 0, and a warm-up before it. */
const CLOCK_BASE_MS = 1_800_000_000_000;
const WARM_UP_MS = 2000;
const TICK_MS = 50;
const LEVELS = ["critical", "standard", "sheddable"] as const;
type Level = (typeof LEVELS)[number];

interface RunResult {
  rate: number;
  shedding: boolean;
  ttft: Record<Level, number[]>;
  shed: Record<Level, number>;
  offered: Record<Level, number>;
  servedPerS: number;
  wallS: number;
}

function levelOf(i: number, seed: number): Level {
  // A fixed, seeded interleaving (not random per run), so on and off see the same mix.
  const u = (((i + 1) * 2654435761 + seed * 40503) >>> 0) / 2 ** 32;
  return u < CRITICAL_SHARE ? "critical" : u < CRITICAL_SHARE + SHEDDABLE_SHARE ? "sheddable" : "standard";
}

function runOne(
  arrivals: Arrival[],
  rate: number,
  shedding: boolean,
  outputVocab: readonly number[],
): RunResult {
  const started = performance.now();
  const rig = buildRig(shedding, outputVocab);
  let sent: Sent;
  const level = new Map<string, Level>();
  try {
    sent = sendArrivals(rig, arrivals, level);
  } finally {
    for (const g of rig.gateways) g.close();
  }
  const ttft: Record<Level, number[]> = { critical: [], standard: [], sheddable: [] };
  let lastFinish = 0;
  for (const r of rig.results) {
    ttft[level.get(r.id) as Level].push(r.ttftMs);
    lastFinish = Math.max(lastFinish, r.finishMs);
  }
  return {
    rate,
    shedding,
    ttft,
    shed: sent.shed,
    offered: sent.offered,
    servedPerS: rig.results.length / (lastFinish / 1000),
    wallS: (performance.now() - started) / 1000,
  };
}

type Live = Map<string, { gateway: VirtualGateway; stream: ReturnType<VirtualGateway["send"]>["stream"] }>;

/** One run's world in virtual time: the simulated cluster, the control plane, two gateways. */
interface Rig {
  timers: VirtualTimers;
  cluster: ReturnType<typeof createSimCluster>;
  gateways: VirtualGateway[];
  /** Finished requests, in finishing order. */
  results: SimRequestResult[];
  /** Requests forwarded and not finished: their gateway and stream. */
  live: Live;
}

function buildRig(shedding: boolean, outputVocab: readonly number[]): Rig {
  const wasm = new Uint8Array(readFileSync(WASM));
  const timers = new VirtualTimers(-WARM_UP_MS);
  const clock = () => CLOCK_BASE_MS + timers.now;
  const results: SimRequestResult[] = [];
  const live: Live = new Map();
  const cluster = createSimCluster({
    dataParallelSize: WORKERS * RANKS,
    numGpuBlocks: Math.floor(200_000 / BLOCK),
    blockSize: BLOCK,
    maxNumSeqs: 256,
    maxNumBatchedTokens: 8192,
    seed: SEED,
    outputVocab,
    balancerRule: "legacy",
    statsIntervalMs: 100,
    onKvEvents: (r, events, at) => {
      timers.runUntil(at);
      cp.kvEvents(r, events, at);
    },
    onFirstToken: (id, _rank, at) => {
      timers.runUntil(at);
      const l = live.get(id);
      if (l !== undefined) l.gateway.firstByte(l.stream);
    },
    onRequestDone: (result) => {
      timers.runUntil(result.finishMs);
      results.push(result);
      const l = live.get(result.id);
      if (l === undefined) return;
      live.delete(result.id);
      l.gateway.finish(l.stream);
    },
  });
  const cp = new VirtualControlPlane(
    {
      workers: WORKERS,
      ranksPerWorker: RANKS,
      kvEventDelayMs: 20,
      latencyMs: 1,
      routing: TRUSTED,
      speculative: true,
      ...(shedding ? { pool: { shedding: SHEDDING } } : {}),
    },
    timers,
    clock,
    cluster.engines,
  );
  const pluginConfig = JSON.stringify({
    controlPlane: { cluster: CONTROL_PLANE_CLUSTER, authority: "kvroute-control-plane" },
  });
  const gateways = [0, 1].map(
    (g) =>
      new VirtualGateway({
        name: `gateway-${g}`,
        wasm,
        threads: 2,
        pluginConfig,
        controlPlane: cp.handler,
        timers,
        clock,
        phaseMs: (g * 37) % 100,
      }),
  );
  timers.runUntil(0);
  for (const g of gateways) assertSynced(g, cp.log.version);
  return { timers, cluster, gateways, results, live };
}

interface Sent {
  shed: Record<Level, number>;
  offered: Record<Level, number>;
}

/**
 * Sends every arrival at its time through the gateways in turn, advancing the cluster and
 * kvroute's clock together, until every forwarded request finished. `level` gets each request's
 * priority level.
 */
function sendArrivals(rig: Rig, arrivals: Arrival[], level: Map<string, Level>): Sent {
  const { timers, cluster, gateways, results, live } = rig;
  const shed: Record<Level, number> = { critical: 0, standard: 0, sheddable: 0 };
  const offered: Record<Level, number> = { critical: 0, standard: 0, sheddable: 0 };
  let submitted = 0;
  let next = 0;
  let i = 0;
  let t = 0;
  const endMs = SECONDS * 1000;
  while (i < arrivals.length || results.length < submitted) {
    if (t > endMs + 600_000) throw new Error(`run did not drain (${results.length} of ${submitted})`);
    // The next arrival, tick, or task of kvroute's own clock, whichever comes first.
    const arrival = arrivals[i]?.atMs ?? Number.POSITIVE_INFINITY;
    const due = timers.nextMs;
    t = Math.max(t, Math.min(arrival, due > t ? due : t + TICK_MS, t + TICK_MS));
    cluster.advanceTo(t);
    timers.runUntil(t);
    for (; i < arrivals.length && (arrivals[i] as Arrival).atMs <= t; i++) {
      const { request } = arrivals[i] as Arrival;
      const lv = levelOf(i, SEED);
      level.set(request.id, lv);
      offered[lv]++;
      const gateway = gateways[next++ % gateways.length] as VirtualGateway;
      const r = gateway.send(request.id, request.body, [["x-kvroute-priority", lv]]);
      if (r.forwarded === null) {
        if (r.localStatus !== 429) throw new Error(`unexpected local answer ${r.localStatus}`);
        shed[lv]++;
        continue;
      }
      const rank = rankOf(r.forwarded.get.bind(r.forwarded), RANKS);
      if (rank < 0) throw new Error("the filter routed to no simulated rank");
      live.set(request.id, { gateway, stream: r.stream });
      cluster.submit({ id: request.id, tokens: request.tokens, maxTokens: request.maxTokens, rank }, t);
      submitted++;
    }
  }
  return { shed, offered };
}

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] as number;
}

const ms = (v: number) =>
  Number.isNaN(v) ? "–" : v >= 10_000 ? `${(v / 1000).toFixed(1)} s` : `${Math.round(v)} ms`;
const ratio = (a: number, b: number) =>
  b > 0 && Number.isFinite(a) ? `${(a / b).toFixed(a / b >= 10 ? 0 : 2)}×` : "–";
const pct = (n: number, d: number) => (d === 0 ? "–" : `${Math.round((100 * n) / d)} %`);

const tok = benchTokenizer();
const workload = noSharing(tok, {
  requests: Math.max(...RATES) * SECONDS,
  promptTokens: PROMPT_TOKENS,
  outputTokens: OUTPUT_TOKENS,
  qps: RATES,
  seed: SEED,
});
const rows: string[] = [];
const all: RunResult[] = [];
for (const rate of RATES) {
  const arrivals = workload
    .run(rate)
    .arrivals.filter((a) => a.atMs < SECONDS * 1000)
    .slice(0, rate * SECONDS);
  const off = runOne(arrivals, rate, false, tok.wordIds);
  const on = runOne(arrivals, rate, true, tok.wordIds);
  all.push(off, on);
  for (const r of [off, on])
    console.log(
      `rate ${rate}/s shedding ${r.shedding ? "on " : "off"}: critical TTFT p50 ${ms(quantile(r.ttft.critical, 0.5))} p90 ${ms(quantile(r.ttft.critical, 0.9))} p99 ${ms(quantile(r.ttft.critical, 0.99))}; shed standard ${r.shed.standard}/${r.offered.standard}, sheddable ${r.shed.sheddable}/${r.offered.sheddable}, critical ${r.shed.critical}; served ${r.servedPerS.toFixed(1)}/s; ${r.wallS.toFixed(1)} s wall`,
    );
  const q = (r: RunResult, lv: Level, p: number) => quantile(r.ttft[lv], p);
  rows.push(
    `| ${rate} | ${ms(q(off, "critical", 0.5))} / ${ms(q(off, "critical", 0.9))} / ${ms(q(off, "critical", 0.99))} | ${ms(q(on, "critical", 0.5))} / ${ms(q(on, "critical", 0.9))} / ${ms(q(on, "critical", 0.99))} | ${ratio(q(off, "critical", 0.5), q(on, "critical", 0.5))} / ${ratio(q(off, "critical", 0.9), q(on, "critical", 0.9))} / ${ratio(q(off, "critical", 0.99), q(on, "critical", 0.99))} | ${ms(q(off, "standard", 0.9))} → ${ms(q(on, "standard", 0.9))} | ${pct(on.shed.standard, on.offered.standard)} | ${pct(on.shed.sheddable, on.offered.sheddable)} | ${on.shed.critical} | ${off.servedPerS.toFixed(1)} → ${on.servedPerS.toFixed(1)} |`,
  );
}

const wall = all.reduce((s, r) => s + r.wallS, 0);
writeResult(
  "shedding",
  `# Overload shedding: critical TTFT under overload (bench/shedding.bench.ts)

\`tsx bench/shedding.bench.ts${QUICK ? " --quick" : ""} --seed=${SEED}\`: the shipped build/kvroute.wasm in the Node
Proxy-Wasm host (2 gateways × 2 worker threads) synced from kvroute's control plane, in front of the
simulated vLLM fleet (${WORKERS} worker × ${RANKS} DP ranks, the simulator's H100/8B latency model), all in virtual
time. ${SECONDS} s of Poisson arrivals of unique ${PROMPT_TOKENS}-token prompts (${OUTPUT_TOKENS} output tokens); priorities in
\`x-kvroute-priority\` from a trusted client: ${Math.round(CRITICAL_SHARE * 100)} % critical, ${Math.round(SHEDDABLE_SHARE * 100)} % sheddable, the rest standard.
Shedding off = the default; on = \`shedding: ${JSON.stringify(SHEDDING)}\`. The same arrivals and mix
for both. A shed request is answered 429 by the gateway and never reaches an engine; the TTFT columns
are over the requests that were served. Seed ${SEED}, one run per cell, ${wall.toFixed(0)} s wall in all.

| offered req/s | critical TTFT p50 / p90 / p99, shedding off | … shedding on | off ÷ on (p50 / p90 / p99) | standard TTFT p90, off → on | standard shed | sheddable shed | critical shed | served req/s, off → on |
|---|---|---|---|---|---|---|---|---|
${rows.join("\n")}

Reading it: below capacity (the first row) standard and critical requests are not shed and their
TTFT is the same either way within the spread of one run (ties are broken at random); a few
sheddable requests are shed in the bursts of Poisson arrivals, when every slot briefly holds more
than ${SHEDDING.sheddable.maxQueued}. Above capacity, without shedding every request joins the engines' queues, which grow
for as long as the overload lasts, so critical requests wait behind all of them — their TTFT grows
with the run's length, not with their own work. With shedding, sheddable then standard requests
are refused once every slot holds more than ${SHEDDING.sheddable.maxQueued} (${SHEDDING.standard.maxQueued}) queued requests, the queues stay near
those thresholds, and critical requests wait behind at most that much work. The fleet serves about
as many requests per second either way (it is saturated in both); shedding decides which ones, and
answers the rest at once with \`Retry-After\` instead of after a long wait. Not measured: clients
that retry after a 429 (the refused requests are dropped here), other seeds (one run per cell), a
fleet larger than one worker. Building the ${Math.max(...RATES) * SECONDS} prompts (tokenizing them) takes about as long again
as the runs.
`,
);
console.log(`wrote ${resultsDir()}/shedding.md`);
