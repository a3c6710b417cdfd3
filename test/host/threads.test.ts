// Worker threads: one root context per plugin configuration and one tick timer per root context
// in every VM (main thread included); a config update adds a root context to running VMs; manual
// ticks, sequential or interleaved the way Envoy's parallel threads can run them; VMs started
// together the way Envoy's workers configure theirs.
import { afterEach, describe, expect, it } from "vitest";
import { createHost, type Host, headers } from "../../host/host.ts";
import { startInParallel, WasmThread } from "../../host/thread.ts";
import { moduleFile, RecordingSink, settle, startUpstream, waitFor } from "./testing.ts";

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

  it("a closed thread drops its queued tasks and its pending turn (nothing it posted runs, nothing keeps it alive)", async () => {
    host = createHost({ wasm: moduleFile("lifecycle"), threads: 1, pluginConfig: "tick=1000" });
    const t = host.threads[0] as WasmThread;
    let ran = 0;
    t.post(() => ran++);
    t.post(() => ran++);
    host.close();
    expect(t.tasks).toHaveLength(0);
    await settle(20);
    expect(ran).toBe(0);
  });
});

const rootLines = (h: Host, prefix: string) =>
  h.core.logs.filter((r) => r.message.startsWith(prefix)).map((r) => `${r.thread} ${r.message}`);

describe("root contexts per plugin configuration (a config update with the same vm_id and code)", () => {
  it("adds a second root context to every running VM: ticks and http-call answers go to their own root, new streams to the new one", async () => {
    const side = await startUpstream((req, _body, res) => res.end(`for ${req.url}`));
    try {
      host = createHost({
        wasm: moduleFile("roots"),
        threads: 1,
        pluginConfig: `name=A;tick=10;call=side`,
        clusters: { side: side.address },
        ticks: "manual",
      });
      const h = host;
      const worker = h.threads[0] as WasmThread;
      const before = h.newStream(worker, new RecordingSink());
      before.decodeHeaders(headers([[":path", "/old"]]), true);
      // Context ids are per VM: the main VM's next is 2, the worker's 3 (its stream took 2).
      expect(h.reconfigure("name=B;tick=10;call=side", false)).toEqual([2, 3]);
      // ContextBase::onStart + onConfigure on the running VM: create, on_vm_start, on_configure.
      expect(
        rootLines(h, "create 3").concat(rootLines(h, "vm_start root=3"), rootLines(h, "configure root=3")),
      ).toEqual([
        "worker_0 create 3 parent=0",
        "worker_0 vm_start root=3",
        "worker_0 configure root=3 name=B",
      ]);
      const after = h.newStream(worker, new RecordingSink());
      after.decodeHeaders(headers([[":path", "/new"]]), true);
      expect(rootLines(h, "headers")).toEqual([
        "worker_0 headers 2 root=1 name=A path=/old",
        "worker_0 headers 4 root=3 name=B path=/new",
      ]);
      h.tick();
      expect(rootLines(h, "tick").filter((l) => l.startsWith("worker_0"))).toEqual([
        "worker_0 tick root=1 name=A",
        "worker_0 tick root=3 name=B",
      ]);
      // Both roots called; tokens are the VM's callout counter (4, 8), each answer to its caller.
      await waitFor(() => rootLines(h, "response").length === 4);
      expect(
        rootLines(h, "response")
          .filter((l) => l.startsWith("worker_0"))
          .sort(),
      ).toEqual([
        "worker_0 response root=1 name=A token=4 own=true body=for /A",
        "worker_0 response root=3 name=B token=8 own=true body=for /B",
      ]);
    } finally {
      await side.close();
    }
  });

  it("a retired configuration's root gets on_done then on_delete once its last stream is gone; a later proxy_done finishes a root whose on_done said not yet", () => {
    host = createHost({
      wasm: moduleFile("roots"),
      threads: 1,
      mainThread: false,
      pluginConfig: "name=A;tick=10",
      ticks: "manual",
    });
    const h = host;
    const worker = h.threads[0] as WasmThread;
    const sink = new RecordingSink();
    const s = h.newStream(worker, sink);
    s.decodeHeaders(headers([[":path", "/slow"]]), false);
    h.reconfigure("name=B;tick=10;doneLater=1");
    // A still has a stream: no on_done yet, and it keeps ticking.
    expect(rootLines(h, "done")).toEqual([]);
    h.tick();
    expect(rootLines(h, "tick")).toEqual(["worker_0 tick root=1 name=A", "worker_0 tick root=3 name=B"]);
    s.decodeData(new Uint8Array(0), true);
    s.encodeHeaders(headers([[":status", "200"]]), true);
    expect(rootLines(h, "done").concat(rootLines(h, "delete root"))).toEqual([
      "worker_0 done root=1 name=A",
      "worker_0 delete root=1 name=A",
    ]);
    expect([...worker.roots.keys()]).toEqual([3]);
    h.tick();
    expect(rootLines(h, "tick").slice(2)).toEqual(["worker_0 tick root=3 name=B"]);
    // B (doneLater) answers on_done with false: it stays until it calls proxy_done itself.
    h.reconfigure("name=C;tick=10");
    expect(rootLines(h, "done").slice(1)).toEqual(["worker_0 done root=3 name=B"]);
    expect([...worker.roots.keys()]).toEqual([3, 4]);
    h.tick();
    expect(rootLines(h, "proxy_done")).toEqual(["worker_0 proxy_done root=3 -> 0"]);
    expect(rootLines(h, "delete root").slice(1)).toEqual(["worker_0 delete root=3 name=B"]);
    expect([...worker.roots.keys()]).toEqual([4]);
  });
});

describe("manual ticks and Envoy's parallel ticks", () => {
  it("interleaved: every root's tick reads shared data as before any of them wrote, so all see the key absent", () => {
    host = createHost({
      wasm: moduleFile("roots"),
      threads: 3,
      pluginConfig: "name=R;tick=10;race=1",
      ticks: "manual",
    });
    host.tick({ interleaved: true });
    // Setting an absent key succeeds whatever the cas: every VM "wins".
    expect(rootLines(host, "race")).toEqual([
      "main race root=1 name=R set=0",
      "worker_0 race root=1 name=R set=0",
      "worker_1 race root=1 name=R set=0",
      "worker_2 race root=1 name=R set=0",
    ]);
  });

  it("sequential: one thread at a time, so only the first sees the key absent", () => {
    host = createHost({
      wasm: moduleFile("roots"),
      threads: 3,
      pluginConfig: "name=R;tick=10;race=1",
      ticks: "manual",
    });
    host.tick();
    expect(rootLines(host, "race")).toEqual(["main race root=1 name=R set=0"]);
    expect(rootLines(host, "tick")).toHaveLength(4);
  });

  it("manual mode runs no timers", async () => {
    host = createHost({
      wasm: moduleFile("roots"),
      threads: 1,
      pluginConfig: "name=R;tick=5",
      ticks: "manual",
    });
    await settle(40);
    expect(rootLines(host, "tick")).toEqual([]);
  });
});

describe("VMs started together (startInParallel), as Envoy's workers configure theirs", () => {
  const started: WasmThread[] = [];
  afterEach(() => {
    for (const t of started.splice(0)) t.close();
  });

  /** Three worker VMs of a host that started none, started together. */
  function startThree(pluginConfig: string): Host {
    const h = createHost({ wasm: moduleFile("roots"), threads: 0, mainThread: false, pluginConfig });
    const vms = [0, 1, 2].map((k) => new WasmThread(h.core, k, `worker_${k}`));
    started.push(...vms);
    startInParallel(vms);
    return h;
  }

  it("each on_configure reads shared data as before any of them wrote: a claim with cas 0 over the absent key hands all of them the same number", () => {
    host = startThree("name=R;count=0");
    // get, get, get, set, set, set: setting an absent key succeeds whatever the cas.
    expect(rootLines(host, "count")).toEqual([
      "worker_0 count root=1 name=R got=0 tries=1 set=0",
      "worker_1 count root=1 name=R got=0 tries=1 set=0",
      "worker_2 count root=1 name=R got=0 tries=1 set=0",
    ]);
    // Read after the start-up: the live store again (the last write), not the snapshot.
    expect(new TextDecoder().decode(host.sharedData("count")?.value)).toBe("1");
  });

  it("over the absent key with a cas no value has (the leader lease's way), the first write wins and the others retry on the key it created", () => {
    host = startThree("name=R;count=4294967295");
    expect(rootLines(host, "count")).toEqual([
      "worker_0 count root=1 name=R got=0 tries=1 set=0",
      "worker_1 count root=1 name=R got=1 tries=2 set=0",
      "worker_2 count root=1 name=R got=2 tries=2 set=0",
    ]);
  });

  it("createHost starts its VMs one after another: the same cas-0 claim happens to work there", () => {
    host = createHost({
      wasm: moduleFile("roots"),
      threads: 3,
      mainThread: false,
      pluginConfig: "name=R;count=0",
    });
    expect(rootLines(host, "count").map((l) => l.replace(/ tries.*/, ""))).toEqual([
      "worker_0 count root=1 name=R got=0",
      "worker_1 count root=1 name=R got=1",
      "worker_2 count root=1 name=R got=2",
    ]);
  });
});
