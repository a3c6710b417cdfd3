// The gateway's subset hint matched as llm-d-router matches it (pkg/epp/requestcontrol/
// candidates.go): an entry's port is dropped and every endpoint of a listed IP is eligible — a
// hint naming a pod's service port still reaches the DP rank listening on another port. Items
// that are not strings are skipped. All engines here listen on 127.0.0.1, so an entry for
// 127.0.0.1 on any port makes them all eligible and any other IP none.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ProtoStruct, ProtoValue } from "../../control-plane/src/epp/messages.ts";
import { chatBody, type EppStack, eppSynced, JSON_HEADERS, startEppStack, until, upstream } from "./stack.ts";

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

const addresses = () => s.engines.map((e) => e.address);
const hint = (values: ProtoValue[]): Record<string, ProtoStruct> => ({
  "envoy.lb.subset_hint": { fields: { "x-gateway-destination-endpoint-subset": { listValue: { values } } } },
});
const ask = (metadata: Record<string, ProtoStruct>) =>
  s.client.exchange(
    {
      path: "/v1/chat/completions",
      headers: JSON_HEADERS,
      body: chatBody("subset", `q ${Math.random()}`, "ext"),
    },
    upstream,
    { metadata },
  );

describe("subset hint by IP (the default)", () => {
  it("an entry with the pod's IP and another port (a service port) makes the pod's rank ports eligible", async () => {
    const r = await ask(hint([{ stringValue: "127.0.0.1:1" }]));
    expect(r.immediate).toBeUndefined();
    expect(addresses()).toContain(r.destination?.split(",")[0]);
    expect(new Set(r.destination?.split(","))).toEqual(new Set(addresses()));
    expect(r.response?.status).toBe(200);
  });

  it("a bare IP and the bracketed form of the same address are that IP", async () => {
    for (const entry of ["127.0.0.1", "[127.0.0.1]:80"]) {
      const r = await ask(hint([{ stringValue: entry }]));
      expect(addresses(), entry).toContain(r.destination?.split(",")[0]);
    }
  });

  it("a non-string item is skipped, the rest still counts", async () => {
    const r = await ask(hint([{ numberValue: 42 }, { stringValue: `127.0.0.1:${9}` }]));
    expect(r.immediate).toBeUndefined();
    expect(addresses()).toContain(r.destination?.split(",")[0]);
  });

  it("near-miss IPs are not eligible: another IP, a longer IP with the same prefix, the IPv4-mapped IPv6 form → 503", async () => {
    const port = s.engines[0]?.address.split(":")[1];
    for (const near of [
      `127.0.0.2:${port}`,
      `127.0.0.10:${port}`,
      `[::ffff:127.0.0.1]:${port}`,
      `27.0.0.1:${port}`,
    ]) {
      const r = await ask(hint([{ stringValue: near }]));
      expect(r.immediate?.status, near).toBe(503);
      expect(JSON.parse(r.immediate?.body.toString() ?? "{}").error.code, near).toBe("no_eligible_endpoint");
    }
  });

  it("only non-string items, or an empty list → 503 (nothing eligible)", async () => {
    for (const values of [[{ numberValue: 1 }, { boolValue: true }], []]) {
      const r = await ask(hint(values));
      expect(r.immediate?.status).toBe(503);
    }
  });
});
