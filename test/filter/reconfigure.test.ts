// A plugin-config change with the same vm_id and code: Envoy adds a second root context to every
// running VM and calls on_done/on_delete on the old one once its streams are gone. The filter keeps
// its state per root context: the new configuration leads (its token, its gateway id), ticks and
// http-call answers reach their own root, streams run with their root's configuration, and a VM
// keeps one thread slot (publishing its in-flight counts once, not once per root).

import { afterEach, describe, expect, it } from "vitest";
import type { Host } from "../../host/host.ts";
import { headers } from "../../host/host.ts";
import type { WasmThread } from "../../host/thread.ts";
import { RecordingSink } from "../host/testing.ts";
import { boardThreads } from "./board.ts";
import {
  entry,
  type FakeControlPlane,
  manualHost,
  pluginConfig,
  pollers,
  startFakeControlPlane,
  syncState,
} from "./fake-control-plane.ts";
import { until } from "./harness.ts";

let cp: FakeControlPlane | null = null;
let host: Host | null = null;
afterEach(async () => {
  host?.close();
  await cp?.close();
  host = null;
  cp = null;
});

const CONFIG_B = {
  controlPlane: { cluster: "cp", authority: "cp.test", token: "token-B", timeoutMs: 600000 },
};

function rounds(h: Host, clock: { now: number }, n: number, vms?: WasmThread[]) {
  for (let i = 0; i < n; i++) {
    h.tick({ interleaved: true, vms });
    clock.now += 100;
  }
}

const threadSlots = (h: Host) =>
  Buffer.from(h.sharedData("kvr.threads")?.value ?? new Uint8Array(4)).readUInt32LE(0);

/** A chat request on `t` with no routing cache (decided by the configuration's failMode), then answered 200 upstream if it got there. */
function coldRequest(h: Host, t: WasmThread): RecordingSink {
  const sink = new RecordingSink();
  const s = h.newStream(t, sink);
  s.decodeHeaders(
    headers([
      [":method", "POST"],
      [":path", "/v1/chat/completions"],
      [":authority", "gw.test"],
      ["content-type", "application/json"],
    ]),
    false,
  );
  s.decodeData(new Uint8Array(Buffer.from('{"model":"m","messages":[]}')), true);
  if (sink.of("reqHeaders").length > 0) s.encodeHeaders(headers([[":status", "200"]]), true);
  return sink;
}

describe("a configuration update (second root context in the running VMs)", () => {
  it("the new configuration leads and serves new streams; the old roots step down and are deleted; no VM takes a second thread slot", async () => {
    cp = await startFakeControlPlane();
    const c = cp;
    const clock = { now: 7_000_000 };
    host = manualHost(cp, () => clock.now, { threads: 2 });
    const h = host;
    rounds(h, clock, 3);
    await until(() => c.polls.length === 1, "the first leader's poll");
    expect(c.polls[0]?.headers.authorization).toBe("Bearer token-A");
    expect(threadSlots(h)).toBe(3);
    const worker = h.threads[0] as WasmThread;
    // Before the update: no cache, failMode open (default) → passed on.
    expect(coldRequest(h, worker).of("reqHeaders")).toHaveLength(1);

    h.reconfigure(pluginConfig({ ...CONFIG_B, failMode: "closed" }));
    // Every VM: two roots were there for a moment; the old ones had no streams, so on_done and
    // on_delete followed at once (and the old leader's call was cancelled with its root).
    for (const t of h.vms()) expect(t.roots.size).toBe(1);
    expect(pollers(h)).toEqual([]);
    rounds(h, clock, 3);
    expect(pollers(h)).toHaveLength(1);
    await until(() => c.polls.length === 2, "the new leader's poll");
    expect(c.polls[1]?.headers.authorization).toBe("Bearer token-B");
    // The new configuration serves new streams: failMode closed → 503 before the first sync.
    const after = coldRequest(h, worker);
    expect(after.of("reqHeaders")).toHaveLength(0);
    expect(after.of("respHeaders")[0]?.headers).toContainEqual([":status", "503"]);
    // One thread slot per VM, one section of the board per VM: the VM's counts are published once.
    expect(threadSlots(h)).toBe(3);
    rounds(h, clock, 2);
    expect(boardThreads(h)).toEqual([0, 1, 2]);
  });

  it("while an old root still drains its streams it keeps ticking but does not lead, and the answer to its last poll is dropped", async () => {
    cp = await startFakeControlPlane();
    const c = cp;
    const clock = { now: 7_000_000 };
    host = manualHost(cp, () => clock.now, { threads: 1, mainThread: false });
    const h = host;
    rounds(h, clock, 3);
    await until(() => c.polls.length === 1, "the first leader's poll");
    const vm = h.threads[0] as WasmThread;
    const [oldRoot] = [...vm.roots.keys()];
    // A stream of the old configuration still in flight: the old root stays.
    const open = h.newStream(vm, new RecordingSink());
    open.decodeHeaders(headers([[":path", "/healthz"]]), false);
    const [newRoot] = h.reconfigure(pluginConfig(CONFIG_B));
    expect([...vm.roots.keys()]).toEqual([oldRoot, newRoot]);
    // The old root's next tick gives the lease up; the new one claims it over two ticks.
    rounds(h, clock, 3);
    await until(() => c.polls.length === 2, "the new root's poll");
    expect(c.polls[1]?.headers.authorization).toBe("Bearer token-B");
    const byRoot = () =>
      [...vm.httpCalls.values()].filter((x) => x.path.startsWith("/v1/sync")).map((x) => x.rootId);
    expect(byRoot().sort()).toEqual([oldRoot, newRoot].sort());
    // The old root's poll is answered: delivered to the old root, which no longer leads.
    c.answer(c.polls[0] as (typeof c.polls)[0], {
      epoch: 5n,
      version: 3,
      entries: [entry("kvr.test", "old")],
    });
    await until(() => byRoot().length === 1, "the old root's answer delivered");
    expect(byRoot()).toEqual([newRoot]);
    expect(syncState(h)).toBeNull();
    // The new root's answer is applied by the new root.
    c.answer(c.polls[1] as (typeof c.polls)[0], {
      epoch: 5n,
      version: 4,
      entries: [entry("kvr.test", "new")],
    });
    await until(() => c.polls.length === 3, "the new root polls again");
    expect(syncState(h)).toEqual({ epoch: 5n, version: 4n });
    expect(c.polls[2]?.headers.authorization).toBe("Bearer token-B");
    // The old configuration's last stream ends: its root is done and deleted.
    open.decodeData(new Uint8Array(0), true);
    open.encodeHeaders(headers([[":status", "200"]]), true);
    expect([...vm.roots.keys()]).toEqual([newRoot]);
    expect(threadSlots(h)).toBe(1);
  });
});
