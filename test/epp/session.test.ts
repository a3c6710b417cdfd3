// Session affinity through the endpoint picker: the picker runs the shipped filter embedded, so a
// request's x-session-id keeps its conversation on the rank its last request went to — here with a
// new prompt no rank holds and an even load, where without the session each pick follows the
// picker's order of equal slots.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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

const SESSIONS = 8;

let s: EppStack;
beforeAll(async () => {
  s = await startEppStack({ engines: [[0, 1, 2, 3]] });
  await until(() => s.cp.ready(), "control plane ready");
  await eppSynced(s.cp);
}, 60_000);
afterAll(async () => s?.close());

async function rankOf(session: string, system: string): Promise<string | undefined> {
  const r = await s.client.exchange(
    {
      path: "/v1/chat/completions",
      headers: [...JSON_HEADERS, ["x-session-id", session]],
      body: chatBody(system, "and then?"),
    },
    upstream,
  );
  expect(r.immediate).toBeUndefined();
  // The session header is the client's: it travels on to the engine.
  expect(header(r.upstreamHeaders, "x-session-id")).toBe(session);
  return header(r.upstreamHeaders, "x-data-parallel-rank");
}

describe("session affinity through the picker", () => {
  it("keeps each session on its rank for a new prompt while the load is even", async () => {
    // The openings at once (see test/e2e/session.test.ts): the picker's own requests spread them.
    const ids = Array.from({ length: SESSIONS }, (_, i) => `epp-${i}`);
    const openings = await Promise.all(ids.map((id, i) => rankOf(id, `opening ${i}`)));
    const ranks = new Map(ids.map((id, i) => [id, openings[i]]));
    for (const [id, rank] of ranks) expect(await rankOf(id, `follow-up of ${id}`)).toBe(rank);
    expect(new Set(ranks.values()).size).toBeGreaterThan(1);
    const kept = () => Number(s.cp.epp?.filter.host.counter("kvroute.session.kept") ?? 0);
    expect(kept()).toBe(SESSIONS);
    // And the control plane learned them from the embedded filter's reports.
    await until(() => s.cp.sessions.size >= SESSIONS, "the fleet's session table");
  });
});
