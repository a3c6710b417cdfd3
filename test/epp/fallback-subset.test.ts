// The filter's answers to two GAIE protocol features, through the picker: the destination as an
// ordered fallback list (best first, then the next best endpoints of the same pool that take the
// same rank headers) and the gateway's subset hint (the filter picks only from it, as Envoy hands
// it the request's dynamic metadata; empty or none eligible → 503), here with exact ip:port matching.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ProtoStruct } from "../../control-plane/src/epp/messages.ts";
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
// Engines 0-2: pool "ext" (vLLM external LB, one rank per port); engines 3-4: pool "int"
// (internal LB, ranks 0-1 on each).
beforeAll(async () => {
  s = await startEppStack({
    engines: [[0], [1], [2], [0, 1], [0, 1]],
    pools: (e) => [
      {
        name: "ext",
        models: ["ext"],
        dpMode: "external",
        endpoints: [0, 1, 2].map((i) => ({ address: e[i]?.address, ranks: [i] })),
      },
      {
        name: "int",
        models: ["int"],
        endpoints: [3, 4].map((i) => ({ address: e[i]?.address, ranks: [0, 1] })),
      },
    ],
    // Every engine listens on 127.0.0.1: the hint is compared ip:port exactly here
    // (subset-ip.test.ts covers the default, by IP as llm-d-router matches).
    epp: { subsetMatch: "address" },
  });
  await until(() => s.cp.ready(), "control plane ready");
  await eppSynced(s.cp);
}, 60_000);
afterAll(async () => s?.close());

const addr = (i: number) => s.engines[i]?.address as string;
const ask = (model: string, metadata?: Record<string, ProtoStruct>, up = upstream) =>
  s.client.exchange(
    {
      path: "/v1/chat/completions",
      headers: JSON_HEADERS,
      body: chatBody("fallback", `q ${Math.random()}`, model),
    },
    up,
    metadata === undefined ? {} : { metadata },
  );

const subset = (v: { list?: string[]; text?: string }): Record<string, ProtoStruct> => ({
  "envoy.lb.subset_hint": {
    fields: {
      "x-gateway-destination-endpoint-subset":
        v.list !== undefined
          ? { listValue: { values: v.list.map((x) => ({ stringValue: x })) } }
          : { stringValue: v.text ?? "" },
    },
  },
});

describe("the destination as an ordered fallback list", () => {
  it("external LB: best first, then the pool's other endpoints, each once; header and metadata agree", async () => {
    const r = await ask("ext");
    const list = header(r.upstreamHeaders, "x-gateway-destination-endpoint")?.split(",") ?? [];
    expect(new Set(list)).toEqual(new Set([addr(0), addr(1), addr(2)]));
    expect(list).toHaveLength(3);
    expect(r.destination).toBe(list.join(","));
    expect(r.served).toBe(list[0]);
  });

  it("orders the fallbacks by cost: a busy engine comes last", async () => {
    const busy = s.engines[1];
    if (busy === undefined) throw new Error("no engine");
    busy.running[1] = 40;
    const slot = s.cp.slots.present().find((sl) => sl.address === addr(1));
    await until(() => s.cp.load.get(slot?.id ?? -1).running >= 40, "load scraped");
    await eppSynced(s.cp);
    for (let i = 0; i < 5; i++) {
      const list = (await ask("ext")).destination?.split(",");
      expect(list?.at(-1)).toBe(addr(1));
    }
    busy.running[1] = 0;
  });

  it("internal LB: the fallback is the same rank on the other endpoint (the rank header stays valid)", async () => {
    for (let i = 0; i < 6; i++) {
      const r = await ask("int");
      const list = r.destination?.split(",") ?? [];
      expect(new Set(list)).toEqual(new Set([addr(3), addr(4)]));
      expect(["0", "1"]).toContain(header(r.upstreamHeaders, "x-data-parallel-rank"));
    }
  });

  it("a gateway that walks the list reports the endpoint that served; the picker counts it", async () => {
    const before = s.cp.epp?.stats.servedElsewhere ?? 0;
    // The best endpoint refuses the connection: the gateway retries the next one.
    const refuseFirst = (h: Array<[string, string]>, b: Buffer): Promise<UpstreamAnswer> => {
      const list = header(h, "x-gateway-destination-endpoint")?.split(",") ?? [];
      const rest = list.slice(1).join(",");
      return upstream(
        h.map(([k, v]) => (k === "x-gateway-destination-endpoint" ? [k, rest] : [k, v])),
        b,
      );
    };
    const r = await ask("ext", undefined, refuseFirst);
    expect(r.response?.status).toBe(200);
    expect(r.served).toBe(r.destination?.split(",")[1]);
    await until(() => (s.cp.epp?.stats.servedElsewhere ?? 0) === before + 1, "served elsewhere counted");
  });
});

describe("the gateway's subset hint", () => {
  it("one endpoint: every pick is that endpoint, and the list holds nothing else", async () => {
    for (let i = 0; i < 8; i++) {
      const r = await ask("ext", subset({ list: [addr(2)] }));
      expect(r.destination).toBe(addr(2));
      expect(r.served).toBe(addr(2));
    }
  });

  it("two endpoints, as a list or as a comma-separated string: picks and fallbacks stay inside", async () => {
    for (const hint of [
      subset({ list: [addr(0), addr(2)] }),
      subset({ text: ` ${addr(2)} , ${addr(0)} ` }),
    ]) {
      for (let i = 0; i < 10; i++) {
        const r = await ask("ext", hint);
        const list = r.destination?.split(",") ?? [];
        expect(list).toHaveLength(2);
        expect(new Set(list)).toEqual(new Set([addr(0), addr(2)]));
      }
    }
  });

  it("near misses are not eligible: another port, a prefix, a suffix, the IPv4-mapped IPv6 form → 503", async () => {
    const a = addr(0);
    const [host, port] = [a.slice(0, a.lastIndexOf(":")), Number(a.slice(a.lastIndexOf(":") + 1))];
    for (const near of [
      `${host}:${port + 1000}`,
      a.slice(0, -1),
      `${a}0`,
      `[::ffff:${host}]:${port}`,
      `${host}`,
    ]) {
      const r = await ask("ext", subset({ list: [near] }));
      expect(r.immediate?.status, near).toBe(503);
      expect(JSON.parse(r.immediate?.body.toString() ?? "{}").error.code, near).toBe("no_eligible_endpoint");
    }
  });

  it("an empty subset → 503, and a subset of another pool's endpoint → 503", async () => {
    for (const hint of [subset({ list: [] }), subset({ text: "" }), subset({ list: [addr(3)] })]) {
      const r = await ask("ext", hint);
      expect(r.immediate?.status).toBe(503);
    }
  });
});
