import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { MetricsScraper, scrapeOnce } from "../../control-plane/src/load/scraper.ts";
import { Fleet } from "../../control-plane/src/model/fleet.ts";
import { LoadModel } from "../../control-plane/src/model/slot-load.ts";
import { type Slot, SlotTable } from "../../control-plane/src/model/slot-table.ts";

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A loopback engine whose /metrics page the test controls. */
async function engine(page: () => string | null): Promise<string> {
  const server = createServer((_req, res) => {
    const body = page();
    if (body === null) {
      res.writeHead(500).end("down");
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" }).end(body);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const page = (ranks: Record<number, [running: number, waiting: number]>) =>
  Object.entries(ranks)
    .flatMap(([r, [run, wait]]) => [
      `vllm:num_requests_running{engine="${r}",model_name="m"} ${run}`,
      `vllm:num_requests_waiting{engine="${r}",model_name="m"} ${wait}`,
    ])
    .join("\n");

function setup(address: string, ranks: "auto" | number[]) {
  const cfg = parseConfig(
    { pools: [{ name: "p", models: ["m"], endpoints: [{ address, ranks }] }], load: { unhealthyAfter: 2 } },
    "t",
    {},
  );
  const pool = cfg.pools[0] as (typeof cfg.pools)[number];
  const slots = new SlotTable(16);
  const load = new LoadModel(cfg.load.unhealthyAfter);
  const events: string[] = [];
  const fleet = new Fleet(slots, load, {
    slotsAdded: (s: Slot[]) => events.push(`+${s.map((x) => x.globalRank).join(",")}`),
    slotsRemoved: (s: Slot[]) => events.push(`-${s.map((x) => x.globalRank).join(",")}`),
  });
  fleet.setEndpoints(pool, pool.endpoints);
  const scraper = new MetricsScraper({
    intervalMs: 1000,
    timeoutMs: 500,
    onResult: (t, o) => fleet.onScrape(t, o),
  });
  scraper.setTargets(fleet.scrapeTargets());
  return { slots, load, fleet, scraper, events, pool };
}

describe("fleet from discovery and scrapes", () => {
  it("discovers ranks from engine labels and follows them as they change", async () => {
    let current: Record<number, [number, number]> = { 0: [1, 0], 1: [2, 3] };
    const address = await engine(() => page(current));
    const { slots, load, fleet, scraper, events } = setup(address, "auto");
    expect(fleet.ranksResolved()).toBe(false);
    await scraper.tick();
    expect(fleet.ranksResolved()).toBe(true);
    expect(slots.present().map((s) => [s.globalRank, s.headerRank])).toEqual([
      [0, 0],
      [1, 1],
    ]);
    expect(load.get(1)).toMatchObject({ running: 2, waiting: 3, healthy: true });
    current = { 0: [0, 0], 2: [5, 0] };
    await scraper.tick();
    expect(events).toEqual(["+0,1", "-1", "+2"]);
    expect(load.get(2).running).toBe(5);
  });

  it("turns slots unhealthy after repeated failures and back on the first good scrape", async () => {
    let up = true;
    const address = await engine(() => (up ? page({ 0: [0, 0] }) : null));
    const { load, scraper } = setup(address, [0]);
    await scraper.tick();
    expect(load.get(0).healthy).toBe(true);
    up = false;
    await scraper.tick();
    expect(load.get(0).healthy).toBe(true);
    await scraper.tick();
    expect(load.get(0)).toMatchObject({ healthy: false, consecutiveFailures: 2 });
    up = true;
    await scraper.tick();
    expect(load.get(0)).toMatchObject({ healthy: true, consecutiveFailures: 0 });
  });

  it("reports a refused connection and a timeout as failures", async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    expect(await scrapeOnce({ key: "x", url: `http://127.0.0.1:${closedPort}/metrics` }, 500)).toEqual({
      ok: false,
      error: "ECONNREFUSED",
    });
    const hang = createServer(() => {});
    servers.push(hang);
    await new Promise<void>((r) => hang.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(hang.address() as AddressInfo).port}/metrics`;
    expect(await scrapeOnce({ key: "y", url }, 100)).toEqual({ ok: false, error: "TimeoutError" });
  });

  it("drops every slot of an endpoint that discovery no longer lists", async () => {
    const address = await engine(() => page({ 0: [0, 0] }));
    const { slots, fleet, events, pool } = setup(address, [0, 1]);
    fleet.setEndpoints(pool, []);
    expect(slots.present()).toEqual([]);
    expect(events).toEqual(["+0,1", "-0,1"]);
    expect(fleet.scrapeTargets()).toEqual([]);
  });
});
