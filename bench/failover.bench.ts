// Failover cost: how long a gateway takes to resync from another control-plane replica, for the
// default cache geometry (65536 buckets × 8 ways, 256 slots), with the index empty and with every
// bucket full. The gateway (the shipped filter in the Node host, 2 worker threads) reaches the
// replicas through one cluster: replica A at priority 0, B at priority 1, active health checks on
// /readyz (host/upstream-cluster.ts, as Envoy). A is stopped; measured from then until the
// gateway holds B's whole key space (kvr.sync at B's epoch, not resyncing, at B's version):
// "detect" is until the first page from B is applied (health checks + the filter's backoff),
// "transfer" the rest (the snapshot's pages, each a round trip and a shared-data write per key).
//   tsx bench/failover.bench.ts [--quick]
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { type ControlPlane, startControlPlane } from "../control-plane/src/app.ts";
import { parseConfig } from "../control-plane/src/config/load-config.ts";
import { syncAnswer } from "../control-plane/src/sync/sync-handler.ts";
import { startGateway } from "../host/gateway.ts";
import { median, writeResult } from "./lib/results.ts";

const QUICK = process.argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";
const RUNS = QUICK ? 1 : 3;
const TOKEN = "failover-bench-token-0123456789";
const HEALTH = {
  path: "/readyz",
  intervalMs: 250,
  timeoutMs: 500,
  unhealthyThreshold: 2,
  healthyThreshold: 1,
};

const metrics = createServer((_req, res) => res.writeHead(200).end("\n"));
await new Promise<void>((r) => metrics.listen(0, "127.0.0.1", r));
const engine = `127.0.0.1:${(metrics.address() as AddressInfo).port}`;

function replica(): Promise<ControlPlane> {
  const cfg = parseConfig(
    {
      authToken: TOKEN,
      pools: [
        {
          name: "p",
          models: ["m"],
          // 2 workers × 4 ranks (the second address only has to be distinct).
          endpoints: [engine, "127.0.0.2:8000"].map((address) => ({
            address,
            ranks: [0, 1, 2, 3],
            metricsUrl: `http://${engine}/metrics`,
          })),
        },
      ],
    },
    "bench",
    {},
  );
  return startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
}

/** Every way of every bucket: speculative rows count as GPU copies, an hour long. */
function fill(cp: ControlPlane): void {
  const now = Date.now();
  const buckets = 65536;
  for (let b = 0; b < buckets; b++)
    for (let w = 0; w < 8; w++)
      cp.index.chunks.speculate((BigInt(w + 1) << 32n) | BigInt(b), 1, w, now, now + 3_600_000);
  cp.publish();
}

/** The snapshot a resyncing gateway walks: pages and bytes at the default page size. */
function snapshotSize(cp: ControlPlane): { pages: number; bytes: number } {
  let version = 0;
  let pages = 0;
  let bytes = 0;
  const opts = { log: cp.log, epoch: cp.epoch, pageBytes: 1024 * 1024 };
  for (;;) {
    const a = syncAnswer(
      opts,
      new URLSearchParams({ epoch: pages === 0 ? "0" : cp.epoch.toString(), version: String(version) }),
      false,
    );
    if (a === null || a.wait) throw new Error("unexpected sync answer");
    pages++;
    bytes += a.body.length;
    if (a.version === version || a.version >= cp.log.version) return { pages, bytes };
    version = a.version;
  }
}

interface Run {
  detectMs: number;
  transferMs: number;
  totalMs: number;
}

async function once(full: boolean): Promise<Run & { pages: number; bytes: number }> {
  const a = await replica();
  const b = await replica();
  if (full) {
    fill(a);
    fill(b);
  }
  const size = snapshotSize(b);
  const authority = (cp: ControlPlane) => cp.url.replace("http://", "");
  const gateway = await startGateway({
    wasm: new URL("../build/kvroute.wasm", import.meta.url).pathname,
    threads: 2,
    vmId: "kvroute",
    rootId: "kvroute",
    pluginConfig: JSON.stringify({
      controlPlane: { cluster: "cp", authority: authority(a), token: TOKEN, timeoutMs: 30_000 },
      tickMs: 20,
      reportMs: 100,
    }),
    clusters: {
      cp: { endpoints: [authority(a), { address: authority(b), priority: 1 }], healthCheck: HEALTH },
    },
    port: 0,
  });
  const sync = () => {
    const v = gateway.host.sharedData("kvr.sync");
    if (v === null) return null;
    const buf = Buffer.from(v.value);
    return {
      epoch: buf.readBigUInt64LE(0),
      version: Number(buf.readBigUInt64LE(8)),
      resyncing: buf.readUInt32LE(16),
    };
  };
  const holds = (cp: ControlPlane) => {
    const s = sync();
    return s !== null && s.epoch === cp.epoch && s.resyncing === 0 && s.version >= cp.log.version;
  };
  while (!holds(a)) await new Promise((r) => setTimeout(r, 5));
  const t0 = performance.now();
  await a.stop();
  let firstPage = 0;
  while (!holds(b)) {
    if (firstPage === 0 && sync()?.epoch === b.epoch) firstPage = performance.now();
    await new Promise((r) => setImmediate(r));
  }
  const done = performance.now();
  if (firstPage === 0) firstPage = done;
  await gateway.close();
  await b.stop();
  return { detectMs: firstPage - t0, transferMs: done - firstPage, totalMs: done - t0, ...size };
}

const out: string[] = [];
out.push(
  `Gateway failover from replica A to B, default cache geometry (65536 × 8, 256 slots), health checks every ${HEALTH.intervalMs} ms (unhealthy after ${HEALTH.unhealthyThreshold}); median of ${RUNS} (ms)`,
  "",
  "| index | snapshot | pages | detect | transfer | total |",
  "|---|---:|---:|---:|---:|---:|",
);
for (const full of [false, true]) {
  const runs: Array<Run & { pages: number; bytes: number }> = [];
  for (let i = 0; i < RUNS; i++) runs.push(await once(full));
  const m = (k: keyof Run) => median(runs.map((r) => r[k])).toFixed(0);
  const r0 = runs[0] as { pages: number; bytes: number };
  out.push(
    `| ${full ? "full (every bucket 8 rows)" : "empty"} | ${(r0.bytes / 1024 / 1024).toFixed(1)} MiB | ${r0.pages} | ${m("detectMs")} | ${m("transferMs")} | ${m("totalMs")} |`,
  );
}
for (const l of out) console.log(l);
writeResult(
  "failover",
  `# Failover: a gateway resyncing from another replica\n\nGenerated by \`npx tsx bench/failover.bench.ts${QUICK ? " --quick" : ""}\`.\n\n${out.join("\n")}\n`,
);
metrics.close();
