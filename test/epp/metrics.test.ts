// The picker's counters on the control plane's /metrics: each moves with the traffic that
// should move it — a routed request, the filter's 404 for an unknown model, a stream that ends
// INVALID_ARGUMENT, a gateway that walks the fallback list — and no other.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { UpstreamAnswer } from "./envoy-ext-proc.ts";
import {
  chatBody,
  type EppStack,
  eppSynced,
  header,
  JSON_HEADERS,
  startEppStack,
  until,
  upstream,
} from "./stack.ts";

let s: EppStack;
beforeAll(async () => {
  s = await startEppStack({
    engines: [[0], [1]],
    pools: (e) => [
      {
        name: "ext",
        models: ["ext"],
        dpMode: "external",
        endpoints: [0, 1].map((i) => ({ address: e[i]?.address, ranks: [i] })),
      },
    ],
  });
  await until(() => s.cp.ready(), "control plane ready");
  await eppSynced(s.cp);
}, 60_000);
afterAll(async () => s?.close());

/** The control plane's /metrics as `name{labels}` → value (the EPP's series only). */
async function scrape(): Promise<Map<string, number>> {
  const text = await (await fetch(`${s.cp.url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^(kvroute_epp_[a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (m !== null) out.set(m[1] as string, Number(m[2]));
  }
  return out;
}

const ask = (model: string, up = upstream) =>
  s.client.exchange(
    {
      path: "/v1/chat/completions",
      headers: JSON_HEADERS,
      body: chatBody("metrics", `q ${Math.random()}`, model),
    },
    up,
  );

/** Scrapes until `name` reached `want` (counters are read at scrape time; a stream ends asynchronously). */
async function reaches(name: string, want: number): Promise<Map<string, number>> {
  let last = new Map<string, number>();
  await until(async () => {
    last = await scrape();
    return (last.get(name) ?? 0) === want;
  }, `${name} = ${want}`);
  return last;
}

describe("endpoint-picker metrics on /metrics", () => {
  it("exports every counter, at 0 before the first request where it has no label", async () => {
    const m = await scrape();
    for (const name of [
      "kvroute_epp_streams_total",
      "kvroute_epp_routed_total",
      "kvroute_epp_invalid_streams_total",
      "kvroute_epp_internal_errors_total",
      "kvroute_epp_served_elsewhere_total",
    ])
      expect(m.has(name), name).toBe(true);
    expect([...m.keys()].filter((k) => k.startsWith("kvroute_epp_immediate_responses_total"))).toEqual([]);
  });

  it("a routed request moves streams and routed, nothing else", async () => {
    const before = await scrape();
    const r = await ask("ext");
    expect(r.response?.status).toBe(200);
    const after = await reaches(
      "kvroute_epp_routed_total",
      (before.get("kvroute_epp_routed_total") ?? 0) + 1,
    );
    expect(after.get("kvroute_epp_streams_total")).toBe((before.get("kvroute_epp_streams_total") ?? 0) + 1);
    expect(after.get("kvroute_epp_served_elsewhere_total")).toBe(
      before.get("kvroute_epp_served_elsewhere_total"),
    );
    expect(after.get("kvroute_epp_invalid_streams_total")).toBe(
      before.get("kvroute_epp_invalid_streams_total"),
    );
  });

  it("the filter's 404 for an unknown model counts as an immediate response with status 404", async () => {
    const before = await scrape();
    const r = await ask("no-such-model");
    expect(r.immediate?.status).toBe(404);
    const key = 'kvroute_epp_immediate_responses_total{status="404"}';
    const after = await reaches(key, (before.get(key) ?? 0) + 1);
    expect(after.get("kvroute_epp_routed_total")).toBe(before.get("kvroute_epp_routed_total"));
    expect(after.has('kvroute_epp_immediate_responses_total{status="503"}')).toBe(false);
  });

  it("a stream that starts with a response counts as invalid", async () => {
    const before = await scrape();
    const call = s.client.openRaw();
    call.on("error", () => {});
    call.on("data", () => {});
    call.write({
      response_headers: { headers: { headers: [{ key: ":status", raw_value: Buffer.from("200") }] } },
    });
    await reaches(
      "kvroute_epp_invalid_streams_total",
      (before.get("kvroute_epp_invalid_streams_total") ?? 0) + 1,
    );
  });

  it("a gateway that walks the fallback list moves served_elsewhere", async () => {
    const before = await scrape();
    const refuseFirst = (h: Array<[string, string]>, b: Buffer): Promise<UpstreamAnswer> => {
      const rest = (header(h, "x-gateway-destination-endpoint")?.split(",") ?? []).slice(1).join(",");
      return upstream(
        h.map(([k, v]) => (k === "x-gateway-destination-endpoint" ? [k, rest] : [k, v])),
        b,
      );
    };
    const r = await ask("ext", refuseFirst);
    expect(r.served).toBe(r.destination?.split(",")[1]);
    await reaches(
      "kvroute_epp_served_elsewhere_total",
      (before.get("kvroute_epp_served_elsewhere_total") ?? 0) + 1,
    );
  });
});

describe("the embedded filter's stats, under the names an Envoy exports them", () => {
  /** Every sample of /metrics as `name{labels}` → value, and each family's TYPE lines. */
  async function all(): Promise<{ samples: Map<string, number>; types: string[] }> {
    const text = await (await fetch(`${s.cp.url}/metrics`)).text();
    const samples = new Map<string, number>();
    const types: string[] = [];
    for (const line of text.split("\n")) {
      if (line.startsWith("# TYPE ")) types.push(line.split(" ")[2] as string);
      const m = /^([a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
      if (m !== null) samples.set(m[1] as string, Number(m[2]));
    }
    return { samples, types };
  }

  it("move with routed requests (outcome counters, the decision time) and name no family twice", async () => {
    const before = (await all()).samples;
    const outcomes = (m: Map<string, number>) =>
      ["kvroute_requests_prefix_hit", "kvroute_requests_speculative_hit", "kvroute_requests_load_only"]
        .map((n) => m.get(n) ?? 0)
        .reduce((a, b) => a + b, 0);
    expect((await ask("ext")).immediate).toBeUndefined();
    const after = await all();
    expect(outcomes(after.samples)).toBe(outcomes(before) + 1);
    expect(after.samples.get("kvroute_decision_us_count")).toBe(
      (before.get("kvroute_decision_us_count") ?? 0) + 1,
    );
    expect(after.samples.has("kvroute_parse_errors")).toBe(true);
    expect(new Set(after.types).size).toBe(after.types.length);
  });
});
