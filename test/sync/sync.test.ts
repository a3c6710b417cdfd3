import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { GatewayRegistry } from "../../control-plane/src/sync/gateways.ts";
import {
  decodeSyncPage,
  encodeSyncPage,
  SyncDecodeError,
  SyncFlags,
  type SyncPage,
} from "../../control-plane/src/sync/sync-codec.ts";
import { createSyncHandler } from "../../control-plane/src/sync/sync-handler.ts";
import { SyncLog } from "../../control-plane/src/sync/sync-log.ts";
import { until } from "../until.ts";

const TOKEN = "test-token-0123456789";
const EPOCH = 0xfedcba9876543210n;
const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

let log: SyncLog;
let gateways: GatewayRegistry;
let server: Server;
let base: string;

/**
 * A long poll that never ends by itself within a test: a poll answered at all was answered
 * because of a change (or at once), never because a slow machine let the wait run out.
 */
const NEVER_MS = 3_600_000;

async function serve(longPollMs: number): Promise<void> {
  const handler = createSyncHandler({
    log,
    epoch: EPOCH,
    gateways,
    authToken: TOKEN,
    longPollMs,
    pageBytes: 1 << 20,
  });
  server = createServer((req, res) => void handler(req, res, new URL(req.url ?? "/", "http://localhost")));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function stopServing(): Promise<void> {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
}

beforeEach(async () => {
  log = new SyncLog();
  gateways = new GatewayRegistry();
  await serve(NEVER_MS);
});

afterEach(stopServing);

async function poll(
  query: Record<string, string | number | bigint>,
  token = TOKEN,
  gateway = "gw-1",
): Promise<SyncPage> {
  const qs = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]));
  const res = await fetch(`${base}/v1/sync?${qs}`, {
    headers: { authorization: `Bearer ${token}`, "x-kvroute-gateway": gateway },
  });
  expect(res.status).toBe(200);
  return decodeSyncPage(new Uint8Array(await res.arrayBuffer()));
}

const asMap = (page: SyncPage) => Object.fromEntries(page.entries.map((e) => [e.key, text(e.value)]));

describe("sync log", () => {
  it("coalesces repeated changes of a key and skips unchanged values", () => {
    log.publish([
      ["a", bytes("1")],
      ["b", bytes("1")],
    ]);
    const v = log.version;
    log.publish([["a", bytes("2")]]);
    log.publish([
      ["a", bytes("3")],
      ["b", bytes("1")],
    ]);
    const { entries, more } = log.changesSince(v, 1 << 20);
    expect(more).toBe(false);
    expect(entries.map((e) => [e.key, text(e.value)])).toEqual([["a", "3"]]);
    expect(log.version).toBe(4);
  });

  it("stays correct across log compaction", () => {
    for (let round = 0; round < 50; round++)
      log.publish(Array.from({ length: 100 }, (_, i) => [`k${i}`, bytes(`${round}`)]));
    const all = log.changesSince(0, 1 << 30).entries;
    expect(all).toHaveLength(100);
    expect(new Set(all.map((e) => text(e.value)))).toEqual(new Set(["49"]));
    expect(log.changesSince(log.version - 1, 1 << 20).entries.map((e) => e.key)).toEqual(["k99"]);
  });

  it("writes the page of changesSince's entries in place, past its buffer's first size and page by page", () => {
    // 300 KiB of values: the page buffer (64 KiB at first) grows while it writes.
    for (let i = 0; i < 30; i++) log.publish([[`k${i}-é`, new Uint8Array(10_000 + i).fill(i)]]);
    for (const [since, maxBytes] of [
      [0, 1 << 30],
      [0, 25_000],
      [7, 1],
      [29, 1 << 20],
      [30, 1 << 20],
    ] as const) {
      const { entries, more } = log.changesSince(since, maxBytes);
      const version = entries.at(-1)?.version ?? since;
      const page = log.writePage(since, maxBytes, false, SyncFlags.reset, EPOCH);
      expect([page.version, page.more]).toEqual([version, more]);
      expect(page.body).toEqual(
        encodeSyncPage({
          flags: SyncFlags.reset | (more ? SyncFlags.more : 0),
          epoch: EPOCH,
          version,
          entries,
        }),
      );
    }
  });
});

describe("GET /v1/sync", () => {
  it("returns the changes after the client's version, then only newer ones", async () => {
    log.publish([
      ["cfg", bytes("c1")],
      ["slots", bytes("s1")],
    ]);
    const first = await poll({ epoch: EPOCH, version: 0 });
    expect(first.flags).toBe(0);
    expect(first.epoch).toBe(EPOCH);
    expect(asMap(first)).toEqual({ cfg: "c1", slots: "s1" });
    expect(first.version).toBe(2);

    log.publish([
      ["slots", bytes("s2")],
      ["b/7", bytes("x")],
    ]);
    const second = await poll({ epoch: EPOCH, version: first.version });
    expect(asMap(second)).toEqual({ slots: "s2", "b/7": "x" });
    expect(second.version).toBe(4);
  });

  it("pages a large snapshot and picks up keys that change between pages", async () => {
    const value = new Uint8Array(1000);
    log.publish(Array.from({ length: 100 }, (_, i) => [`b/${i}`, value.map(() => i)]));
    const seen = new Map<string, number>();
    let version = 0;
    let pages = 0;
    for (;;) {
      const page = await poll({ epoch: EPOCH, version, max_bytes: 10_000 });
      pages++;
      for (const e of page.entries) seen.set(e.key, e.value[0] as number);
      version = page.version;
      if (pages === 2) log.publish([["b/0", new Uint8Array(1000).fill(200)]]);
      if ((page.flags & SyncFlags.more) === 0) break;
    }
    expect(pages).toBeGreaterThanOrEqual(10);
    expect(seen.size).toBe(100);
    expect(seen.get("b/0")).toBe(200);
    expect(seen.get("b/99")).toBe(99);
    expect(version).toBe(log.version);
  });

  it("resends everything with the reset flag after an epoch change or a version from the future", async () => {
    log.publish([
      ["cfg", bytes("c")],
      ["b/1", bytes("x")],
    ]);
    for (const query of [
      { epoch: 42n, version: 2 },
      { epoch: EPOCH, version: 999 },
    ]) {
      const page = await poll(query);
      expect(page.flags & SyncFlags.reset).toBe(SyncFlags.reset);
      expect(asMap(page)).toEqual({ cfg: "c", "b/1": "x" });
      expect(page.version).toBe(2);
    }
  });

  it("holds the poll until a change arrives", async () => {
    log.publish([["cfg", bytes("c")]]);
    const waits = vi.spyOn(log, "waitForChange");
    const pending = poll({ epoch: EPOCH, version: 1 });
    // Once the handler waits, only a change can answer the poll (its timer is an hour away).
    await until("the handler waiting for news", () => waits.mock.calls.length === 1);
    log.publish([["load", bytes("l")]]);
    const page = await pending;
    expect(asMap(page)).toEqual({ load: "l" });
    expect(page.version).toBe(2);
    expect(await waits.mock.results[0]?.value).toBe(true); // woken by news, not by its timer
  });

  it("answers an empty page at the same version when nothing changes within the wait", async () => {
    // This one is about the wait running out, so it gets a short one.
    await stopServing();
    await serve(300);
    log.publish([["cfg", bytes("c")]]);
    const waits = vi.spyOn(log, "waitForChange");
    const page = await poll({ epoch: EPOCH, version: 1 });
    expect(page.entries).toEqual([]);
    expect(page.version).toBe(1);
    expect(page.flags).toBe(0);
    expect(await waits.mock.results[0]?.value).toBe(false); // its timer ended it
  });

  it("refuses requests without the right bearer token", async () => {
    for (const headers of [
      {} as Record<string, string>,
      { authorization: "Bearer wrong-token-0123456789" },
      { authorization: TOKEN },
    ]) {
      const res = await fetch(`${base}/v1/sync?epoch=1&version=0`, { headers });
      expect(res.status).toBe(401);
      expect((await res.json()) as unknown).toEqual({
        error: { message: "missing or wrong bearer token", code: "unauthorized" },
      });
    }
  });

  it("rejects malformed parameters with 400", async () => {
    for (const qs of [
      "epoch=-1&version=0",
      "epoch=1&version=1.5",
      "epoch=0x10&version=0",
      "epoch=1&version=01",
    ]) {
      const res = await fetch(`${base}/v1/sync?${qs}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status, qs).toBe(400);
    }
  });

  it("records each gateway with the version it holds", async () => {
    log.publish([["cfg", bytes("c")]]);
    await poll({ epoch: 1, version: 0 }, TOKEN, "envoy-a");
    await poll({ epoch: EPOCH, version: 0 }, TOKEN, "envoy-b");
    const list = gateways.list();
    expect(list.map((g) => [g.id, g.version, g.resets])).toEqual([
      ["envoy-a", 1, 1],
      ["envoy-b", 1, 0],
    ]);
  });
});

describe("sync codec", () => {
  it("round-trips and rejects damaged pages", () => {
    const page: SyncPage = {
      flags: 3,
      epoch: 2n ** 64n - 1n,
      version: 2 ** 40,
      entries: [
        { key: "b/1", value: bytes("v") },
        { key: "é", value: new Uint8Array() },
      ],
    };
    const encoded = encodeSyncPage(page);
    expect(decodeSyncPage(encoded)).toEqual(page);
    expect(() => decodeSyncPage(encoded.subarray(0, encoded.length - 1))).toThrow(SyncDecodeError);
    expect(() => decodeSyncPage(new Uint8Array([...encoded, 0]))).toThrow(/trailing/);
    const bad = encoded.slice();
    bad[0] = 0;
    expect(() => decodeSyncPage(bad)).toThrow(/magic/);
  });

  it("marks patch entries in protocol 3 only, in the value length's top bit", () => {
    const plain: SyncPage = {
      flags: 0,
      epoch: 1n,
      version: 7,
      entries: [{ key: "kvr.b.1", value: bytes("v") }],
    };
    const one = encodeSyncPage(plain);
    expect(new DataView(one.buffer).getUint16(4, true)).toBe(1);
    const patched: SyncPage = {
      ...plain,
      entries: [...plain.entries, { key: "kvr.b.2", value: bytes("patch"), patch: true }],
    };
    const two = encodeSyncPage(patched);
    const view = new DataView(two.buffer);
    expect(view.getUint16(4, true)).toBe(3);
    // The second entry's length word: 5 | 1 << 31.
    const second = 28 + 2 + 7 + 4 + 1;
    expect(view.getUint32(second + 2 + 7, true)).toBe((5 | 0x8000_0000) >>> 0);
    expect(decodeSyncPage(two)).toEqual(patched);
    // In protocol 1 the bit would be a length: the page does not decode.
    const forged = two.slice();
    forged[4] = 1;
    expect(() => decodeSyncPage(forged)).toThrow(SyncDecodeError);
  });
});
