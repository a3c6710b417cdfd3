// The shipped filter (build/kvroute.wasm in the Proxy-Wasm host) applies the bucket patches its
// control plane serves: after churn in the index — rows added, replaced, dropped, buckets over
// their `ways` — every bucket the gateway holds is byte for byte the control plane's.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeSyncPage } from "../../control-plane/src/sync/sync-codec.ts";
import { type Stack, startStack, synced, until } from "./harness.ts";

const BUCKETS = 16;
let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ engines: [[0, 1, 2, 3]], buckets: BUCKETS });
  await until(() => stack.cp.ready(), "control plane ready");
  await synced(stack);
});
afterAll(async () => stack?.close());

describe("bucket patches through the shipped filter", () => {
  it("leave the gateway holding the control plane's images after churn", async () => {
    const log = stack.cp.log;
    let patches = 0;
    const writePage = log.writePage.bind(log);
    log.writePage = (...args: Parameters<typeof log.writePage>) => {
      const page = writePage(...args);
      patches += decodeSyncPage(page.body).entries.filter((e) => e.patch === true).length;
      return page;
    };
    const chunks = stack.cp.index.chunks;
    const now = Date.now();
    let h = 0x2545f4914f6cdd1dn;
    const held: bigint[] = [];
    for (let round = 0; round < 30; round++) {
      for (let i = 0; i < 40; i++) {
        h = (h * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
        if (held.length > 0 && i % 3 === 0) {
          const gone = held.splice(Number(h % BigInt(held.length)), 1)[0] as bigint;
          chunks.remove(gone, Number(gone % 4n));
        } else {
          held.push(h);
          chunks.add(h, 1 + Number(h % 9n), Number(h % 4n), now + round);
        }
      }
      if (round % 3 === 0) await synced(stack);
      else stack.cp.publish();
    }
    await synced(stack);
    expect(patches).toBeGreaterThan(0);
    for (let b = 0; b < BUCKETS; b++) {
      const gateway = stack.gateway.host.sharedData(`kvr.b.${b}`)?.value;
      expect(gateway === undefined ? undefined : new Uint8Array(gateway)).toEqual(log.get(`kvr.b.${b}`));
    }
  }, 60_000);
});
