// What the host hands the filter (a request body, an answer's chunks, the gateway board, bucket
// images) is copied into blocks the filter's own `malloc` takes outside the GC heap
// (filter/assembly/host.ts): the filter must free each one. Counted where it would show, in the
// shipped module's linear memory, which only grows: a block kept per request would add the size
// of a body to it every request.
import { afterEach, describe, expect, it } from "vitest";
import { headers } from "../../host/host.ts";
import type { WasmThread } from "../../host/thread.ts";
import { chat, ShippedFilter } from "../filter-core/shipped-filter.ts";

let f: ShippedFilter;
afterEach(() => f?.close());

const SYSTEM = "You are a careful assistant who answers in full sentences. ".repeat(1600);
const enc = new TextEncoder();

/** One request with a ~100 KB body and a streamed answer of 40 chunks ending in its usage. */
function request(q: number): void {
  const r = f.route(chat(SYSTEM, `question ${q}`));
  expect([q, r.outcome, r.status]).toEqual([q, "prefix_hit", 0]);
  r.stream.encodeHeaders(
    headers([
      [":status", "200"],
      ["content-type", "text/event-stream"],
    ]),
    false,
  );
  for (let k = 0; k < 40; k++)
    r.stream.encodeData(enc.encode(`data: {"choices":[{"delta":{"content":"word ${k} "}}]}\n\n`), false);
  const usage = { prompt_tokens: 20000, prompt_tokens_details: { cached_tokens: 19000 } };
  r.stream.encodeData(
    enc.encode(`data: ${JSON.stringify({ choices: [], usage })}\n\ndata: [DONE]\n\n`),
    true,
  );
  f.drain();
}

describe("the host's copies in the filter's memory", () => {
  it("are freed: memory stays put over hundreds of requests with 100 KB bodies", () => {
    f = new ShippedFilter();
    f.hold(chat(SYSTEM, "question 0"), 1);
    f.publish();
    f.tick();
    const mem = (f.host.threads[0] as WasmThread).mem;
    const requests = (from: number, to: number) => {
      for (let q = from; q < to; q++) {
        request(q);
        // The sync rewrites a bucket now and then: the VM reads it again and frees the old image.
        if (q % 50 === 0) {
          f.publish();
          f.tick();
        }
      }
    };
    // Until the collector's slack settles: linear memory grows in doublings (2 → 4 → 8 MiB here),
    // so where the live heap peaks in the first few hundred requests decides whether they cross one.
    requests(0, 600);
    const settled = mem.size;
    const bodyBytes = enc.encode(chat(SYSTEM, "question 0")).length;
    requests(600, 1000);
    // A leak of one body per request would have added 400 × 100 KB; the GC's own slack is far less.
    expect(bodyBytes).toBeGreaterThan(90_000);
    expect(mem.size - settled).toBeLessThan(40 * bodyBytes);
  });
});
