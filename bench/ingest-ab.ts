// Builds of the routing core side by side on the ingest path, for a change to filter/core: the
// end-to-end path (frames → RankIngest → the batch fast path → the index) into a turned-over
// index — one that held as many blocks of other chains and had them removed, so its tables are at
// their working size and new records reuse freed ones, as in a long-running control plane. Each
// build runs in processes of its own (a fresh JIT and heap: nothing of one build's run is in the
// other's), alternated round by round, so the machine's swings fall on every build alike.
//
// Why alternate: on the shared 2-core machine the same build's end-to-end median moves 1.3–2.8 M
// stored blocks per CPU-second between runs minutes apart. Alternated, the swings fall on both
// sides of a ratio, but not evenly within a few processes: name the baseline twice first (an A/A
// run) to see the minute's noise — two such runs read 1.04 and 1.24 × between the copies
// (docs/kv-events.md "Performance") — and read an effect only beyond it.
//
//   npx asc filter/core/index.ts --config asconfig.json --target core --outFile /tmp/new.wasm
//   npx tsx bench/ingest-ab.ts build/kvroute-core.wasm /tmp/new.wasm [--rounds=3] [--runs=11] [--shape=4x4]
//
// Prints each process's median, each build's median of them, and its ratio to the first build.
// Not a *.bench.ts: `npm run bench` has no second build to compare.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { encodeSeq } from "../control-plane/src/events/frames.ts";
import {
  benchIndex,
  benchPoolTokens,
  benchRankIngest,
  ChainMaker,
  SEQUENCE_BLOCKS,
  type Shape,
  SLOT,
} from "./lib/ingest-fixtures.ts";
import { median } from "./lib/results.ts";

const SEQUENCES = 2000;
const SETS = ["a", "a-removed", "b", "b-removed"] as const;

function flag(name: string, fallback: string): string {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? fallback : a.slice(name.length + 3);
}

function count(name: string, fallback: number): number {
  const n = Number(flag(name, String(fallback)));
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} needs a positive integer`);
  return n;
}

/** Length-prefixed payloads, so every process reads the same bytes without tokenizing again. */
function pack(payloads: Buffer[]): Buffer {
  const parts: Buffer[] = [];
  for (const p of payloads) {
    const n = Buffer.alloc(4);
    n.writeUInt32LE(p.length);
    parts.push(n, p);
  }
  return Buffer.concat(parts);
}

function unpack(bytes: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.length; ) {
    const n = bytes.readUInt32LE(at);
    out.push(Buffer.from(bytes.subarray(at + 4, at + 4 + n)));
    at += 4 + n;
  }
  return out;
}

/** Writes the two chain sets (and their removals) in `shape` to a new directory. */
function writePayloads(shape: Shape): string {
  const dir = mkdtempSync(join(tmpdir(), "kvroute-ingest-ab-"));
  const chains = new ChainMaker();
  const sets: Record<(typeof SETS)[number], Buffer[]> = { a: [], "a-removed": [], b: [], "b-removed": [] };
  for (let s = 0; s < SEQUENCES; s++) {
    const a = 2n ** 63n + BigInt(s) * 1000n;
    const b = 2n ** 62n + BigInt(s) * 1000n;
    sets.a.push(...chains.batches(s, a, shape));
    sets["a-removed"].push(ChainMaker.removal(a));
    sets.b.push(...chains.batches(SEQUENCES + s, b, shape));
    sets["b-removed"].push(ChainMaker.removal(b));
  }
  for (const name of SETS) writeFileSync(join(dir, name), pack(sets[name]));
  return dir;
}

/** One process of one build: `runs` timed passes over a turned-over index, as JSON on stdout. */
function child(dir: string, runs: number): void {
  const sets = Object.fromEntries(SETS.map((n) => [n, unpack(readFileSync(join(dir, n)))])) as Record<
    (typeof SETS)[number],
    Buffer[]
  >;
  const index = benchIndex(benchPoolTokens());
  const ingest = benchRankIngest(index);
  const topic = Buffer.alloc(0);
  let seq = 0;
  const feed = (payloads: Buffer[]) => {
    for (const f of payloads.map((p) => [topic, encodeSeq(seq++), p])) ingest.onFrames(f);
  };
  const slot = index.slot(SLOT);
  if (slot === undefined) throw new Error("no slot");
  // The turn-over (untimed), which also warms the JIT up.
  feed(sets.a);
  feed(sets["a-removed"]);
  const rates: number[] = [];
  for (let r = 0; r < runs; r++) {
    const [stores, removals] = r % 2 === 0 ? [sets.b, sets["b-removed"]] : [sets.a, sets["a-removed"]];
    const frames = stores.map((p) => [topic, encodeSeq(seq++), p]);
    const before = slot.stats.storedBlocks;
    const t0 = process.cpuUsage();
    for (const f of frames) ingest.onFrames(f);
    const d = process.cpuUsage(t0);
    const stored = slot.stats.storedBlocks - before;
    if (stored !== SEQUENCES * SEQUENCE_BLOCKS) throw new Error(`stored ${stored} blocks`);
    rates.push(stored / ((d.user + d.system) / 1e6));
    feed(removals);
    if (slot.stats.blocks !== 0) throw new Error("the removals left blocks");
  }
  process.stdout.write(`${JSON.stringify(rates)}\n`);
}

function parent(): void {
  const builds = process.argv.slice(2).filter((a) => !a.startsWith("--"));
  if (builds.length < 1) throw new Error("name one or more core builds (.wasm), the first the baseline");
  const [perEvent, perBatch] = flag("shape", "4x4").split("x").map(Number);
  const positive = (n: number | undefined) => n !== undefined && Number.isInteger(n) && n >= 1;
  if (!positive(perEvent) || !positive(perBatch) || SEQUENCE_BLOCKS % (perEvent as number) !== 0)
    throw new Error(`--shape needs BLOCKSxEVENTS, both positive, BLOCKS dividing ${SEQUENCE_BLOCKS}`);
  const rounds = count("rounds", 3);
  const runs = count("runs", 11);
  const dir = writePayloads({ blocksPerEvent: perEvent as number, eventsPerBatch: perBatch as number });
  // By position, not by path: the same build named twice (an A/A run: the noise) is two builds.
  const medians = builds.map((): number[] => []);
  try {
    for (let r = 0; r < rounds; r++)
      for (const [i, build] of builds.entries()) {
        const out = spawnSync(
          process.execPath,
          [...process.execArgv, fileURLToPath(import.meta.url), `--child=${dir}`, `--runs=${runs}`],
          { encoding: "utf8", env: { ...process.env, KVROUTE_CORE_WASM: resolve(build) } },
        );
        if (out.status !== 0) throw new Error(`${build}: ${out.stderr}`);
        const rates = JSON.parse(out.stdout.trim().split("\n").at(-1) ?? "[]") as number[];
        medians[i]?.push(median(rates));
      }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const base = median(medians[0] ?? []);
  console.log(
    `end to end into a turned-over index, ${perEvent} blocks/event × ${perBatch} events/batch, ${rounds} processes × ${runs} runs per build (M stored blocks per CPU-second):`,
  );
  for (const [i, build] of builds.entries()) {
    const ms = medians[i] ?? [];
    const m = median(ms);
    console.log(
      `  ${basename(build)}: ${ms.map((x) => (x / 1e6).toFixed(2)).join(" ")} → median ${(m / 1e6).toFixed(2)} (${(m / base).toFixed(3)} × ${basename(builds[0] as string)})`,
    );
  }
}

const childDir = flag("child", "");
if (childDir !== "") child(childDir, count("runs", 11));
else parent();
