// 100k hostile requests straight through the filter in the host (no sockets): random and
// mutated bodies, hostile rank and routing headers, random chunking, with a synced cache. Zero
// traps, and every request either reached the router or got a local answer.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HttpStream, headers } from "../../host/index.ts";
import { BodyFuzzer } from "../core/fuzz-bodies.ts";
import { RecordingSink } from "../host/testing.ts";
import { type Stack, startStack, synced, until } from "./harness.ts";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    engines: [[0, 1, 2, 3]],
    threads: 2,
    routing: { rankHeaderPolicy: { mode: "honor" } },
  });
  await until(() => stack.cp.ready(), "control plane ready");
  await synced(stack);
});
afterAll(async () => stack?.close());

const RANK_VALUES = ["0", "3", "-1", "+3", "1_0", "", "99999999999", "1,2", "4", "\u00ff"];
const PATHS = ["/v1/chat/completions", "/v1/completions", "/v1/completions?x=1", "/v1/models", "/"];

describe("filter fuzz", () => {
  it("survives 100k hostile requests with zero traps", () => {
    const fuzzer = new BodyFuzzer(0xf17e);
    let rng = 12345;
    const rand = (n: number) => {
      rng = (rng * 1103515245 + 12345) >>> 0;
      return rng % n;
    };
    const threads = stack.gateway.host.threads;
    let forwarded = 0;
    let answered = 0;
    const N = 100_000;
    for (let i = 0; i < N; i++) {
      const thread = threads[i % threads.length];
      if (thread === undefined) throw new Error("no thread");
      const sink = new RecordingSink();
      const stream: HttpStream = stack.gateway.host.newStream(thread, sink);
      const h: Array<[string, string]> = [
        [":method", rand(10) === 0 ? "GET" : "POST"],
        [":path", PATHS[rand(PATHS.length)] as string],
        [":authority", "gw"],
        ["content-type", "application/json"],
      ];
      if (rand(3) === 0) h.push(["x-data-parallel-rank", RANK_VALUES[rand(RANK_VALUES.length)] as string]);
      if (rand(5) === 0) h.push(["x-gateway-destination-endpoint", "169.254.169.254:80"]);
      const body = fuzzer.next();
      stream.decodeHeaders(headers(h), body.length === 0);
      if (body.length > 0) {
        const cut = rand(body.length + 1);
        if (cut > 0 && cut < body.length) stream.decodeData(body.subarray(0, cut), false);
        stream.decodeData(cut > 0 && cut < body.length ? body.subarray(cut) : body, true);
      }
      const toRouter = sink.of("reqHeaders");
      if (toRouter.length > 0) {
        forwarded++;
        const dest = toRouter[0]?.headers.find(([k]) => k === "x-gateway-destination-endpoint")?.[1];
        expect(dest === undefined || dest === stack.engines[0]?.address).toBe(true);
        stream.encodeHeaders(headers([[":status", "200"]]), false);
        stream.encodeData(new TextEncoder().encode("ok"), true);
      } else {
        answered++;
        expect(sink.of("respHeaders").length).toBe(1);
      }
    }
    expect(forwarded + answered).toBe(N);
    expect(forwarded).toBeGreaterThan(N / 2);
    expect(threads.every((t) => !t.failed)).toBe(true);
    expect(stack.gateway.host.logs().filter((l) => /wasm failed|abort/i.test(l))).toEqual([]);
  }, 300_000);
});
