// Routing-core benchmark (DESIGN §9): XXH64 / chunk-chain throughput, and scan + render + hash of
// a 2k-token and a 32k-token chat body, each next to the floor measured in the same run: a plain
// copy of the same bytes, and copy + XXH64. Also the control plane's per-KV-block feedChunks
// rate through the Node wrapper. Numbers only; nothing here asserts a time.
//   tsx bench/core.bench.ts [--quick]
import { pathToFileURL } from "node:url";
import { core } from "../control-plane/src/core/core-wasm.ts";
import { feedChunks, hashRequest, initialState } from "../control-plane/src/core/kvroute-core.ts";
import type { SegmentTemplate } from "../control-plane/src/core/segment-template.ts";
import { readJson } from "../test/core/helpers.ts";
import { type Percentiles, sample, throughput } from "./lib/timing.ts";

const QUICK = process.argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";

const WORDS = {
  /** English prose: ASCII, with a newline or a quote now and then (escaped in JSON). */
  english: [
    "the",
    "router",
    "keeps",
    "a",
    "prefix",
    "cache",
    "of",
    "every",
    "engine,",
    "and",
    "tokens.",
    "It",
  ],
  /** About a quarter of the words non-ASCII or escaped: a harder case for the scanner. */
  mixed: [
    "the",
    "router",
    "cache",
    "prefix",
    "engine",
    "token",
    "rank",
    "naïve",
    "日本",
    "🌍",
    '"quoted"',
    "a\\b",
  ],
} as const;

/** A chat body of about `tokens` tokens (≈ 4 bytes each): system prompt plus alternating turns. */
export function chatBody(tokens: number, words: readonly string[] = WORDS.mixed, variant = 0): Uint8Array {
  let seed = 1 + variant * 7919;
  const word = (): string => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return words[(seed >>> 16) % words.length] as string;
  };
  const text = (bytes: number): string => {
    let s = "";
    while (s.length < bytes) s += `${word()}${(seed >>> 8) % 29 === 0 ? "\n" : " "}`;
    return s;
  };
  const messages = [{ role: "system", content: text(1200) }];
  let total = 1200;
  let turn = 0;
  while (total < tokens * 4) {
    const len = Math.min(600 + (turn % 3) * 400, tokens * 4 - total + 1);
    messages.push({ role: turn % 2 === 0 ? "user" : "assistant", content: text(len) });
    total += len;
    turn++;
  }
  if (messages.at(-1)?.role !== "user") messages.push({ role: "user", content: text(100) });
  return new TextEncoder().encode(JSON.stringify({ model: "Qwen/Qwen3-8B", stream: true, messages }));
}

export function benchCore(): void {
  const ms = QUICK ? 300 : 2000;
  const c = core();
  const ex = c.ex;
  const template = readJson<SegmentTemplate>("test/fixtures/segment-templates/qwen3.json");
  const row = (label: string, value: string): void => {
    process.stdout.write(`  ${label.padEnd(44)} ${value}\n`);
  };

  // ---- raw hashing throughput (bytes already in Wasm memory) ----
  const big = 1 << 20;
  const ptr = c.io(big);
  for (let i = 0; i < big; i++) c.u8[ptr + i] = (i * 31 + 7) & 0xff;
  const xxhBps = throughput(ms, big, () => {
    ex.xxh64Io(big, 0n);
  });
  const chainBps = throughput(ms, big, () => {
    ex.chunkFeedIo(1n, big, 128);
  });
  const src = c.u8.slice(ptr, ptr + big);
  const copyBps = throughput(ms, big, () => {
    c.u8.set(src, ptr);
  });
  process.stdout.write("hashing (1 MiB in Wasm memory)\n");
  row("XXH64", `${(xxhBps / 1e9).toFixed(2)} GB/s`);
  row("chunk chain, C = 128", `${(chainBps / 1e9).toFixed(2)} GB/s`);
  row("plain copy JS → Wasm memory (same bytes)", `${(copyBps / 1e9).toFixed(2)} GB/s`);

  // ---- the filter's hot path ----
  // Each case cycles through 16 different bodies of the same shape: scanning one body over and
  // over lets the CPU's branch predictor learn it and flatters small bodies. Every sample
  // includes copying the body into Wasm memory, as the filter must (proxy_get_buffer_bytes);
  // the floors are that copy alone and the copy plus one XXH64 over the body.
  const VARIANTS = 16;
  const modelName = "Qwen/Qwen3-8B";
  const model = new TextEncoder().encode(modelName);
  for (const [kind, tokens] of [
    ["english", 2048],
    ["mixed", 2048],
    ["english", 32768],
    ["mixed", 32768],
  ] as const) {
    const bodies = Array.from({ length: VARIANTS }, (_, v) => chatBody(tokens, WORDS[kind], v));
    const maxLen = Math.max(...bodies.map((b) => b.length));
    const bodyPtr = c.io(maxLen + model.length);
    // Load the template once, as the filter does at configure time (it gets id 0).
    hashRequest(bodies[0] as Uint8Array, { endpoint: "chat", template, model: modelName });
    const tplId = 0;
    let streamBytes = 0;
    let chunks = 0;
    for (const body of bodies) {
      c.u8.set(body, bodyPtr);
      c.u8.set(model, bodyPtr + body.length);
      const status = ex.hashRequestIo(body.length, 1, tplId, 0, model.length, 0, 128, 8 << 20);
      if (status !== 2) throw new Error(`bench body did not render exactly (status ${status})`);
      streamBytes += ex.renderedLen();
      chunks += ex.hashCount();
    }
    let k = 0;
    const next = (): Uint8Array => bodies[k++ % VARIANTS] as Uint8Array;
    const pipeline = sample(ms, () => {
      const body = next();
      const mem = c.u8;
      mem.set(body, bodyPtr);
      mem.set(model, bodyPtr + body.length);
      ex.hashRequestIo(body.length, 1, tplId, 0, model.length, 0, 128, 8 << 20);
    });
    const copy = sample(ms, () => {
      c.u8.set(next(), bodyPtr);
    });
    const copyHash = sample(ms, () => {
      const body = next();
      c.u8.set(body, bodyPtr);
      ex.xxh64Io(body.length, 0n);
    });
    const wrapper = sample(ms, () => {
      hashRequest(next(), { endpoint: "chat", template, model: modelName });
    });
    const meanBody = Math.round(bodies.reduce((a, b) => a + b.length, 0) / VARIANTS);
    process.stdout.write(
      `${tokens / 1024}k-token ${kind} chat (Qwen3 template, ${VARIANTS} bodies): body ≈ ${meanBody} B → stream ≈ ${Math.round(streamBytes / VARIANTS)} B, ≈ ${Math.round(chunks / VARIANTS)} chunks\n`,
    );
    const fmt = (p: Percentiles): string => `p50 ${p.p50us.toFixed(2)} µs  p99 ${p.p99us.toFixed(2)} µs`;
    row("copy in + scan + render + hash", fmt(pipeline));
    row("floor: copy in", fmt(copy));
    row("floor: copy in + XXH64", fmt(copyHash));
    row(
      "ratio to copy / to copy + XXH64 (p50)",
      `${(pipeline.p50us / copy.p50us).toFixed(1)}× / ${(pipeline.p50us / copyHash.p50us).toFixed(1)}×`,
    );
    row("via the TS wrapper hashRequest()", fmt(wrapper));
  }

  // ---- the control plane's ingest path: one feedChunks per KV block ----
  const blockBytes = 64; // ≈ 16 tokens
  const blocks = Array.from({ length: 256 }, (_, i) => new Uint8Array(blockBytes).fill(i));
  let state = initialState("Qwen/Qwen3-8B");
  let i = 0;
  const perBlock = sample(ms, () => {
    state = feedChunks(state, blocks[i++ & 255] as Uint8Array, 128).state;
  });
  process.stdout.write(`control plane: feedChunks per ${blockBytes}-byte KV block (C = 128)\n`);
  row("per call", `p50 ${perBlock.p50us.toFixed(2)} µs  p99 ${perBlock.p99us.toFixed(2)} µs`);
  const calls = throughput(ms, 1, () => {
    state = feedChunks(state, blocks[i++ & 255] as Uint8Array, 128).state;
  });
  row("blocks per second (one core)", `${Math.round(calls).toLocaleString("en")}`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchCore();
}
