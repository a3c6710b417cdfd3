// The host's upstream clusters balance like Envoy's: priority levels, active HTTP health checks
// (a 503 marks a host unhealthy at once, network failures only at the threshold, the first check
// decides at once), failover to the next level, round robin inside a level, panic when a level has
// too few healthy hosts — and without health checking no failover at all.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { type HealthCheckConfig, UpstreamCluster } from "../../host/upstream-cluster.ts";
import { until } from "../until.ts";

const servers: Server[] = [];
const clusters: UpstreamCluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) c.close();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A server whose /health answers `status.code`. */
async function upstream(): Promise<{
  address: string;
  status: { code: number };
  hosts: string[];
  server: Server;
}> {
  const status = { code: 200 };
  const hosts: string[] = [];
  const server = createServer((req, res) => {
    hosts.push(req.headers.host ?? "");
    res.writeHead(req.url === "/health" ? status.code : 404).end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  servers.push(server);
  return { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, status, hosts, server };
}

const HC: HealthCheckConfig = {
  path: "/health",
  intervalMs: 20,
  timeoutMs: 500,
  unhealthyThreshold: 3,
  healthyThreshold: 2,
};
const picked = (c: UpstreamCluster) => {
  const a = c.pick();
  return `${a.host}:${a.port}`;
};
const cluster = (...args: ConstructorParameters<typeof UpstreamCluster>) => {
  const c = new UpstreamCluster(...args);
  clusters.push(c);
  return c;
};

describe("host upstream clusters", () => {
  it("without health checking never leaves priority 0, as Envoy (nothing says a host is gone)", async () => {
    const b = await upstream();
    const c = cluster("cp", { endpoints: ["127.0.0.1:1", { address: b.address, priority: 1 }] });
    expect(new Set(Array.from({ length: 10 }, () => picked(c)))).toEqual(new Set(["127.0.0.1:1"]));
  });

  it("fails over to priority 1 when priority 0 fails its checks, and back when it passes again", async () => {
    const a = await upstream();
    const b = await upstream();
    const c = cluster("cp", { endpoints: [a.address, { address: b.address, priority: 1 }], healthCheck: HC });
    await until("both hosts checked", () => c.hosts().every((h) => h.healthy));
    expect(picked(c)).toBe(a.address);
    expect(a.hosts[0]).toBe("cp");

    a.status.code = 503; // an answer outside the expected statuses: unhealthy at the next check
    await until("a unhealthy", () => c.hosts()[0]?.healthy === false);
    expect(new Set(Array.from({ length: 10 }, () => picked(c)))).toEqual(new Set([b.address]));

    a.status.code = 200;
    await until("a healthy again", () => c.hosts()[0]?.healthy === true);
    expect(picked(c)).toBe(a.address);
  });

  it("counts network failures up to the threshold", async () => {
    const a = await upstream();
    const b = await upstream();
    const slow = { ...HC, intervalMs: 150 };
    const c = cluster("cp", {
      endpoints: [a.address, { address: b.address, priority: 1 }],
      healthCheck: slow,
    });
    await until("both hosts checked", () => c.hosts().every((h) => h.healthy));
    a.server.closeAllConnections();
    a.server.close();
    servers.splice(servers.indexOf(a.server), 1);
    // Refused connections: still healthy after one and two, unhealthy at the third in a row.
    const samples: Array<{ healthy: boolean; failures: number }> = [];
    await until("a unhealthy after refused checks", () => {
      const h = c.hosts()[0] as { healthy: boolean; failures: number };
      samples.push({ healthy: h.healthy, failures: h.failures });
      return !h.healthy;
    });
    expect(samples.some((s) => s.healthy && s.failures === 2)).toBe(true);
    expect(samples.filter((s) => s.failures < 3).every((s) => s.healthy)).toBe(true);
    expect(picked(c)).toBe(b.address);
  });

  it("balances round robin over a level's healthy hosts, and panics to all of them when too few are healthy", async () => {
    const hosts = await Promise.all([upstream(), upstream(), upstream()]);
    const c = cluster("cp", { endpoints: hosts.map((h) => h.address), healthCheck: HC });
    await until("all checked", () => c.hosts().every((h) => h.healthy));
    expect(new Set(Array.from({ length: 6 }, () => picked(c))).size).toBe(3);
    (hosts[0] as { status: { code: number } }).status.code = 503;
    await until("one unhealthy", () => c.hosts()[0]?.healthy === false);
    expect(new Set(Array.from({ length: 6 }, () => picked(c)))).toEqual(
      new Set(hosts.slice(1).map((h) => h.address)),
    );
    (hosts[1] as { status: { code: number } }).status.code = 503;
    await until("two unhealthy", () => c.hosts()[1]?.healthy === false);
    // One healthy host of three is under the 50 % panic threshold: Envoy balances over all.
    expect(new Set(Array.from({ length: 6 }, () => picked(c))).size).toBe(3);
  });
});
