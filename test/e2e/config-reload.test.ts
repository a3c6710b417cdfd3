// A configuration reload end to end: the control plane started from a file in a ConfigMap-style
// volume, a gateway (build/kvroute.wasm in the Node host) in front of simulated vLLM workers, and
// requests flowing the whole time. Each class of change is published by swapping the volume's
// `..data` symlink as the kubelet does: live fields reach the gateway as a new kvr.cfg (a trust
// change is seen in the gateway's answers), restart-only fields are refused with a log line and a
// metric, a broken file keeps the old configuration. Throughout: no request fails, the epoch stays,
// the gateway never resyncs and the index is never reset.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import type { ControlPlane } from "../../control-plane/src/app.ts";
import type { ReloadResult } from "../../control-plane/src/config/reload-stats.ts";
import { ConfigMapVolume } from "../config/configmap-volume.ts";
import { chat, type E2E, e2eRawConfig, startE2E, synced, until } from "./harness.ts";

const volume = new ConfigMapVolume();
const CONFIG = volume.path("config.yaml");
const logs: Array<{ msg: string; applied?: string[]; refused?: string[]; err?: string }> = [];
const logger = pino({ level: "info" }, { write: (line: string) => void logs.push(JSON.parse(line)) });

let e: E2E;
let cp: ControlPlane;
// biome-ignore lint/suspicious/noExplicitAny: edits of the YAML-shaped configuration
let raw: Record<string, any>;

/** Requests through the gateway from beforeAll to afterAll; every status is kept. */
const statuses: number[] = [];
let loadRunning = true;
let loadDone: Promise<void> = Promise.resolve();

interface Status {
  index: { resets: number };
  gateways: Array<{ id: string; resets: number }>;
}
const status = async () => (await (await fetch(`${cp.url}/v1/status`)).json()) as Status;
/** Each gateway's resyncs from scratch after its first sync (that first one is a reset too). */
let resetsAtStart: Status["gateways"] = [];

beforeAll(async () => {
  e = await startE2E({
    workers: 2,
    ranks: 2,
    noControlPlane: true,
    controlPlane: { configFile: CONFIG, logger },
  });
  raw = e2eRawConfig({}, e.workers, e.ranks);
  volume.update({ "config.yaml": stringify(raw) });
  cp = await e.startControlPlane();
  await until(() => cp.ready(), "control plane ready");
  await synced(e);
  resetsAtStart = (await status()).gateways;
  const loop = async (client: number) => {
    for (let n = 0; loadRunning; n++) {
      const r = await chat(e, `client ${client} system prompt, shared by its turns. `.repeat(6), `turn ${n}`);
      statuses.push(r.status);
    }
  };
  loadDone = Promise.all([0, 1, 2].map(loop)).then(() => {});
}, 60_000);

afterAll(async () => {
  loadRunning = false;
  await loadDone;
  await e?.close();
  volume.remove();
});

const gatewayCfg = () => Buffer.from(e.gateway.host.sharedData("kvr.cfg")?.value ?? []).toString("hex");
const publishedCfg = () => Buffer.from(cp.log.get("kvr.cfg") ?? []).toString("hex");

/** Writes the new file through the volume and waits until the control plane's reload is counted. */
async function reloadTo(edit: (r: typeof raw) => void, expected: ReloadResult, text?: string) {
  const before = cp.reloads.counts.get(expected) ?? 0;
  const requestsBefore = statuses.length;
  const next = structuredClone(raw);
  edit(next);
  volume.update({ "config.yaml": text ?? stringify(next) });
  await until(() => (cp.reloads.counts.get(expected) ?? 0) === before + 1, `a reload counted as ${expected}`);
  await synced(e);
  // Requests ran across the reload, not only before or after it.
  await until(() => statuses.length > requestsBefore + 3, "requests after the reload");
  if (expected === "applied" || expected === "partly_applied") raw = next;
}

describe("configuration reload with a gateway attached", () => {
  it("applies a trust change live: the gateway starts refusing client rank headers", async () => {
    const pinned = () => chat(e, "pin me", "hello", { headers: { "x-data-parallel-rank": "1" } });
    expect((await pinned()).status).toBe(200); // mode ignore: the header is stripped
    const cfgBefore = gatewayCfg();
    await reloadTo((r) => (r.routing.rankHeaderPolicy = { mode: "reject" }), "applied");
    expect(gatewayCfg()).not.toBe(cfgBefore);
    expect(gatewayCfg()).toBe(publishedCfg());
    expect((await pinned()).status).toBe(400);
    expect(logs.find((l) => l.msg === "configuration reloaded")?.applied).toEqual([
      "routing.rankHeaderPolicy.mode",
    ]);
    await reloadTo((r) => (r.routing.rankHeaderPolicy = { mode: "ignore" }), "applied");
    expect((await pinned()).status).toBe(200);
  });

  it("applies weights and a pool's policy and shedding as a new kvr.cfg on the gateway", async () => {
    const cfgBefore = gatewayCfg();
    await reloadTo((r) => {
      r.routing.overlapWeight = 1.5;
      r.routing.temperature = 0.1;
      r.pools[0].policy = "least-load";
      r.pools[0].shedding = { enabled: true, standard: { maxQueued: 64 } };
    }, "applied");
    expect(gatewayCfg()).not.toBe(cfgBefore);
    expect(gatewayCfg()).toBe(publishedCfg());
    expect(cp.config().pools[0]?.policy).toBe("least-load");
    expect(cp.config().routing.overlapWeight).toBe(1.5);
  });

  it("refuses restart-only fields with a log line and a metric, and keeps their running values", async () => {
    const cfgBefore = gatewayCfg();
    const version = cp.log.version;
    await reloadTo((r) => {
      r.cache.buckets = 2048;
      r.sync.longPollMs = 800;
    }, "refused");
    expect(gatewayCfg()).toBe(cfgBefore);
    expect(cp.log.get("kvr.cfg")).toBeDefined();
    expect(cp.config().cache.buckets).toBe(1024);
    expect(logs.at(-1)).toMatchObject({
      msg: "configuration reload: these fields change only on a restart; their running values are kept",
      refused: ["cache.buckets", "sync.longPollMs"],
    });
    const metrics = await (await fetch(`${cp.url}/metrics`)).text();
    expect(metrics).toContain('kvroute_config_reloads_total{result="refused"} 1');
    expect(metrics).toContain("kvroute_config_restart_pending_fields 2");
    expect(cp.log.version).toBeGreaterThanOrEqual(version); // load keeps publishing; kvr.cfg did not
  });

  it("applies the live part of a mixed change and refuses the rest", async () => {
    await reloadTo((r) => {
      r.cache.buckets = 2048;
      r.routing.decodeWeight = 2;
    }, "partly_applied");
    expect(cp.config().routing.decodeWeight).toBe(2);
    expect(cp.config().cache.buckets).toBe(1024);
    expect(gatewayCfg()).toBe(publishedCfg());
    // Back to the running restart-only values: nothing waits for a restart any more.
    await reloadTo((r) => {
      r.cache.buckets = 1024;
      r.routing.decodeWeight = 1;
    }, "applied");
    expect(cp.reloads.restartPending).toEqual([]);
  });

  it("keeps the old configuration when the file is invalid: a schema error, then broken YAML", async () => {
    const cfgBefore = gatewayCfg();
    const running = structuredClone(cp.config());
    await reloadTo((r) => (r.routing.temperature = -1), "invalid");
    expect(logs.at(-1)?.msg).toBe("configuration reload failed: the running configuration is kept");
    expect(logs.at(-1)?.err).toContain("routing.temperature");
    await reloadTo(() => {}, "invalid", "routing: [unclosed\n");
    expect(cp.config()).toEqual(running);
    expect(gatewayCfg()).toBe(cfgBefore);
  });

  it("no request failed during the reloads; the epoch, the gateway's sync and the index stayed", async () => {
    const epoch = cp.epoch;
    expect(statuses.length).toBeGreaterThan(20);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    const sync = e.gateway.host.sharedData("kvr.sync")?.value as Uint8Array;
    expect(Buffer.from(sync).readBigUInt64LE(0)).toBe(epoch);
    const now = await status();
    expect(now.index.resets).toBe(0);
    expect(now.gateways.map((g) => [g.id, g.resets])).toEqual(resetsAtStart.map((g) => [g.id, g.resets]));
    expect(cp.index.chunks.size).toBeGreaterThan(0);
  });

  it("applies a static pool's endpoints live: a removed worker gets no new request, a re-added one does", async () => {
    const port = (w: number) => `127.0.0.1:${e.workers[w]?.port}`;
    const presentOn = (w: number) => cp.slots.present().filter((x) => x.address === port(w)).length;
    const endpoints = structuredClone(raw.pools[0].endpoints);
    await reloadTo((r) => (r.pools[0].endpoints = [endpoints[0]]), "applied");
    await until(() => presentOn(1) === 0, "worker 1's slots gone");
    await synced(e);
    for (let n = 0; n < 6; n++)
      expect((await chat(e, `after removal ${n} `.repeat(30), "hi")).worker).toBe(0);
    await reloadTo((r) => (r.pools[0].endpoints = endpoints), "applied");
    await until(() => presentOn(1) === e.ranks, "worker 1's slots back");
    await until(() => cp.slots.present().every((x) => cp.load.get(x.id).healthy), "every slot healthy");
    await synced(e);
    let reached = false;
    for (let n = 0; !reached; n++)
      reached = (await chat(e, `after re-adding ${n} `.repeat(30), "hi")).worker === 1;
    expect(statuses.filter((x) => x !== 200)).toEqual([]);
    expect(cp.epoch).toBe(Buffer.from(e.gateway.host.sharedData("kvr.sync")?.value ?? []).readBigUInt64LE(0));
  });
});
