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

/** What the filter must do with one request, from its method, path and rank header alone. */
type Expect = "bad-rank" | "untouched" | "routed";

function expectationOf(method: string, path: string, rank: string | undefined): Expect {
  if (rank !== undefined && !(/^(0|[1-9][0-9]{0,9})$/.test(rank) && Number(rank) <= 0xffffffff))
    return "bad-rank";
  const p = path.split("?")[0];
  return method === "POST" && (p === "/v1/chat/completions" || p === "/v1/completions")
    ? "routed"
    : "untouched";
}

describe("filter fuzz", () => {
  it("survives 100k hostile requests with zero traps, each answered as its class demands", () => {
    const fuzzer = new BodyFuzzer(0xf17e);
    let rng = 12345;
    const rand = (n: number) => {
      rng = (rng * 1103515245 + 12345) >>> 0;
      return rng % n;
    };
    const threads = stack.gateway.host.threads;
    const engine = stack.engines[0]?.address;
    const seen: Record<string, number> = {};
    const count = (k: string) => {
      seen[k] = (seen[k] ?? 0) + 1;
    };
    const N = 100_000;
    for (let i = 0; i < N; i++) {
      const thread = threads[i % threads.length];
      if (thread === undefined) throw new Error("no thread");
      const sink = new RecordingSink();
      const stream: HttpStream = stack.gateway.host.newStream(thread, sink);
      const method = rand(10) === 0 ? "GET" : "POST";
      const path = PATHS[rand(PATHS.length)] as string;
      const h: Array<[string, string]> = [
        [":method", method],
        [":path", path],
        [":authority", "gw"],
        ["content-type", "application/json"],
      ];
      const rank = rand(3) === 0 ? (RANK_VALUES[rand(RANK_VALUES.length)] as string) : undefined;
      if (rank !== undefined) h.push(["x-data-parallel-rank", rank]);
      if (rand(5) === 0) h.push(["x-gateway-destination-endpoint", "169.254.169.254:80"]);
      const body = fuzzer.next();
      stream.decodeHeaders(headers(h), body.length === 0);
      if (body.length > 0) {
        const cut = rand(body.length + 1);
        if (cut > 0 && cut < body.length) stream.decodeData(body.subarray(0, cut), false);
        stream.decodeData(cut > 0 && cut < body.length ? body.subarray(cut) : body, true);
      }
      const want = expectationOf(method, path, rank);
      const where = `request ${i}: ${method} ${path} rank=${JSON.stringify(rank)}`;
      const toRouter = sink.of("reqHeaders")[0];
      const answer = sink.of("respHeaders")[0];
      // Exactly one of the two: forwarded, or answered by the filter.
      expect(toRouter === undefined, where).not.toBe(answer === undefined);
      if (toRouter !== undefined) {
        const get = (k: string) => toRouter.headers.find(([n]) => n === k)?.[1];
        expect(want, where).not.toBe("bad-rank");
        if (want === "untouched") {
          expect(get("x-gateway-destination-endpoint"), where).toBeUndefined();
          expect(get("x-data-parallel-rank"), where).toBeUndefined();
          count("untouched");
        } else {
          expect(get("x-gateway-destination-endpoint"), where).toBe(engine);
          if (rank !== undefined) {
            expect(get("x-data-parallel-rank"), where).toBe(rank);
            count("pinned");
          } else {
            expect(["0", "1", "2", "3"], where).toContain(get("x-data-parallel-rank"));
            count("routed");
          }
        }
        stream.encodeHeaders(headers([[":status", "200"]]), false);
        stream.encodeData(new TextEncoder().encode("ok"), true);
      } else {
        const status = answer?.headers.find(([k]) => k === ":status")?.[1];
        const code = (
          JSON.parse(
            sink
              .of("respData")
              .map((d) => d.data)
              .join("") || "{}",
          ) as {
            error?: { code?: string };
          }
        ).error?.code;
        if (want === "bad-rank") {
          expect([status, code], where).toEqual(["400", "invalid_rank_header"]);
          count("bad-rank");
        } else {
          expect(want, where).toBe("routed");
          // The only local answers for a routed request: a model no pool serves, a rank it does not.
          if (code === "rank_out_of_range") expect(rank, where).toBe("4");
          else expect([status, code], where).toEqual(["404", "model_not_found"]);
          count(code as string);
        }
      }
    }
    // Every class happened, so every branch above was exercised.
    for (const k of ["bad-rank", "untouched", "routed", "pinned", "model_not_found", "rank_out_of_range"])
      expect(seen[k] ?? 0, `${k}: ${JSON.stringify(seen)}`).toBeGreaterThan(100);
    expect(threads.every((t) => !t.failed)).toBe(true);
    expect(stack.gateway.host.logs().filter((l) => /wasm failed|abort|trap|unreachable/i.test(l))).toEqual(
      [],
    );
  }, 300_000);
});
