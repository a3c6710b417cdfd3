import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatBody, post, type Stack, startStack, synced, until } from "./harness.ts";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    engines: [
      [0, 1, 2, 3],
      [0, 1, 2, 3],
    ],
  });
  await until(() => stack.cp.ready(), "control plane ready");
  await synced(stack);
});
afterAll(async () => stack?.close());

describe("the filter in the Node host", () => {
  it("syncs the control plane's cache into shared data", () => {
    const keys = stack.gateway.host.sharedDataKeys();
    expect(keys).toEqual(
      expect.arrayContaining([
        "kvr.cfg",
        "kvr.slots",
        "kvr.load",
        "kvr.b.0",
        "kvr.b.255",
        "kvr.sync",
        "kvr.lease",
      ]),
    );
  });

  it("routes a chat to an engine with a destination and a rank header", async () => {
    const r = await post(stack, "/v1/chat/completions", chatBody("You are helpful.", "Hi"));
    expect(r.status).toBe(200);
    const hit = stack.engines.flatMap((e) => e.hits).at(-1);
    expect(hit?.headers["x-gateway-destination-endpoint"]).toBe(hit?.engine);
    expect(hit?.headers["x-data-parallel-rank"]).toMatch(/^[0-3]$/);
  });
});
