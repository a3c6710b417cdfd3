// Session affinity across gateways: two gateways (the Node host running build/kvroute.wasm) in
// front of one engine with four ranks, synced from one real control plane. A session's requests
// through gateway A are reported (by hash) to the control plane, which publishes the fleet's
// session table (kvr.sc.<j>) to every gateway; the session's next request, through gateway B and
// with a prompt no rank holds, lands on the rank A chose — while the load is even, so without
// the session B would pick by its own order of equal slots. The counts reach the control plane's Prometheus output.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Gateway, startGateway } from "../../host/gateway.ts";
import { chatBody, pluginConfigFor, type Stack, startStack, synced, until } from "./harness.ts";

const WASM = new URL("../../build/kvroute.wasm", import.meta.url).pathname;
const SESSIONS = 8;

let stack: Stack;
let b: Gateway;
beforeAll(async () => {
  stack = await startStack({ engines: [[0, 1, 2, 3]] });
  b = await startGateway({
    wasm: WASM,
    threads: 2,
    vmId: "kvroute",
    rootId: "kvroute",
    pluginConfig: pluginConfigFor(stack.cp.url),
    node: { id: "gw-b" },
    allowOnHeadersStopIteration: true,
    port: 0,
    clusters: { kvroute_control_plane: new URL(stack.cp.url).host },
  });
  await until(() => stack.cp.ready(), "control plane ready");
  await synced(stack);
  await syncedGateway(b);
});
afterAll(async () => {
  await b?.close();
  await stack?.close();
});

async function syncedGateway(g: Gateway): Promise<void> {
  stack.cp.publish();
  const want = BigInt(stack.cp.log.version);
  await until(() => {
    const v = g.host.sharedData("kvr.sync");
    return v !== null && Buffer.from(v.value).readBigUInt64LE(8) >= want;
  }, `gateway sync to version ${want}`);
}

/** One chat through `g` with the session header; the rank the engine got. */
async function chat(g: Gateway, session: string, system: string): Promise<string> {
  const res = await fetch(`${g.url}/v1/chat/completions`, {
    method: "POST",
    body: chatBody(system, "what next?"),
    headers: { "content-type": "application/json", "x-session-id": session },
  });
  const json = (await res.json()) as { rank: string | null };
  expect(res.status).toBe(200);
  return String(json.rank);
}

describe("session affinity across gateways", () => {
  it("continues a session started on gateway A on its rank when its next request goes to gateway B", async () => {
    // The first turns at once, and the engine answers none until all have arrived: A's own
    // unanswered requests spread them (one after another, each would follow A's order of equal
    // slots and, on an unchanged load image, take the same rank). Holding the answers makes the
    // overlap certain; without it a loaded machine could answer each before the next is routed.
    const engine = stack.engines[0] as (typeof stack.engines)[number];
    const held: Array<() => void> = [];
    engine.reply = (res, hit) => {
      const rank = hit.headers["x-data-parallel-rank"];
      held.push(() =>
        res
          .writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify({ engine: engine.address, rank: typeof rank === "string" ? rank : null })),
      );
      if (held.length === SESSIONS) for (const answer of held.splice(0)) answer();
    };
    const ids = Array.from({ length: SESSIONS }, (_, i) => `conv-${i}`);
    const firsts = await Promise.all(ids.map((id, i) => chat(stack.gateway, id, `first ${i}`)));
    engine.reply = undefined;
    const ranks = new Map(ids.map((id, i) => [id, firsts[i] as string]));
    // A's leader reports the sessions; the control plane learns them and publishes them to B.
    await until(() => stack.cp.sessions.size >= SESSIONS, "the control plane to learn the sessions");
    // "While the load is even": A's first turns have all ended, and A has reported so. Its report
    // of them in flight may come after the sessions (A reports every reportMs); until the next one
    // B would see them at their ranks as another gateway's queued work and, rightly, move a
    // session whose rank looks busy. A loaded machine stretches that window.
    await until(
      () => stack.cp.slots.all().every((s) => stack.cp.load.get(s.id).inflight === 0),
      "A's report that its first turns ended",
    );
    await syncedGateway(b);
    for (const [id, rank] of ranks) expect(await chat(b, id, `second turn of ${id}`)).toBe(rank);
    expect(Number(b.host.counter("kvroute.session.kept") ?? 0)).toBe(SESSIONS);
    // The ties were real: A's sessions did not all land on one rank.
    expect(new Set(ranks.values()).size).toBeGreaterThan(1);
  });

  it("counts the sessions' outcomes in the control plane's Prometheus output", async () => {
    const metric = async (outcome: string) => {
      const text = await (await fetch(`${stack.cp.url}/metrics`)).text();
      const line = text
        .split("\n")
        .find((l) => l.startsWith(`kvroute_session_requests_total{outcome="${outcome}"}`));
      return Number(line?.split(" ")[1] ?? 0);
    };
    await until(async () => (await metric("kept")) >= SESSIONS, "B's kept sessions in the metrics");
    expect(await metric("new")).toBe(SESSIONS);
    const text = await (await fetch(`${stack.cp.url}/metrics`)).text();
    expect(text).toMatch(new RegExp(`^kvroute_sessions ${SESSIONS}$`, "m"));
  });
});
