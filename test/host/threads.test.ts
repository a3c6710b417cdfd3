// Worker threads: one root context and one tick timer per VM (main thread included), and
// realistic interleaving — with preemption on, another thread runs between a shared-data read
// and the CAS write, so CasMismatch really happens and retries are exercised.
import { afterEach, describe, expect, it } from "vitest";
import { createHost, type Host } from "../../host/host.ts";
import { moduleFile, settle } from "./testing.ts";

let host: Host | null = null;
afterEach(() => {
  host?.close();
  host = null;
});

describe("threads", () => {
  it("every VM ticks on its own root context", async () => {
    host = createHost({ wasm: moduleFile("lifecycle"), threads: 2, pluginConfig: "tick=15" });
    await settle(120);
    const byThread = new Map<string, number>();
    for (const r of host.core.logs) {
      if (r.message === "tick root=1") byThread.set(r.thread, (byThread.get(r.thread) ?? 0) + 1);
    }
    expect([...byThread.keys()].sort()).toEqual(["main", "worker_0", "worker_1"]);
    for (const n of byThread.values()) expect(n).toBeGreaterThanOrEqual(3);
  });

  it("a closed host stops ticking", async () => {
    host = createHost({ wasm: moduleFile("lifecycle"), threads: 1, pluginConfig: "tick=5" });
    host.close();
    const n = host.logs((m) => m.startsWith("tick")).length;
    await settle(40);
    expect(host.logs((m) => m.startsWith("tick")).length).toBe(n);
  });
});
