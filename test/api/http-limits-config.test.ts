// The `http` limits as the control plane runs them: read from the configuration, applied to
// its one listener, and counted in /metrics (the listener's behaviour under each limit:
// http-limits.test.ts).
import { connect } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { ConfigError, parseConfig } from "../../control-plane/src/config/load-config.ts";
import { until } from "../until.ts";

// An engine address nothing listens on: discovery and scrapes fail quietly, the listener is what counts.
const pools = [{ name: "p", models: ["m"], endpoints: [{ address: "127.0.0.1:9", ranks: [0] }] }];

function problemsOf(http: unknown): string[] {
  try {
    parseConfig({ pools, http }, "t", {});
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe("http limits in the configuration", () => {
  it("defaults to 1024 connections, 10 s for headers and 30 s for a whole request", () => {
    expect(parseConfig({ pools }, "t", {}).http).toEqual({
      maxConnections: 1024,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
    });
  });

  it("refuses a headers timeout longer than the request's, and values out of range", () => {
    expect(problemsOf({ headersTimeoutMs: 2_000, requestTimeoutMs: 1_000 })).toEqual([
      "http.headersTimeoutMs: headersTimeoutMs must not exceed requestTimeoutMs",
    ]);
    expect(problemsOf({ headersTimeoutMs: 1_000, requestTimeoutMs: 1_000 })).toEqual([]);
    expect(problemsOf({ maxConnections: 0 })).toHaveLength(1);
    expect(problemsOf({ requestTimeoutMs: 3_600_001 })).toHaveLength(1);
    expect(problemsOf({ maxConections: 5 })).toHaveLength(1); // a misspelt field is not ignored
  });
});

describe("the control plane's listener under its configured limits", () => {
  let cp: ControlPlane;
  const port = () => Number(new URL(cp.url).port);
  beforeAll(async () => {
    const cfg = parseConfig(
      { pools, http: { maxConnections: 1, headersTimeoutMs: 100, requestTimeoutMs: 200 } },
      "test",
      {},
    );
    cp = await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
  });
  afterAll(async () => {
    await cp.stop();
  });

  it("refuses a second connection, cuts a stalled upload with 408, and says so in /metrics", async () => {
    const first = connect(port(), "127.0.0.1");
    const firstData: Buffer[] = [];
    first.on("data", (d) => firstData.push(d));
    first.write("POST /v1/report HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"); // and no more
    const second = connect(port(), "127.0.0.1");
    let secondClosed = false;
    const secondData: Buffer[] = [];
    second.on("data", (d) => secondData.push(d));
    second.on("error", () => {});
    second.on("close", () => {
      secondClosed = true;
    });
    await until("the second connection refused", () => secondClosed);
    expect(secondData).toEqual([]);
    await until("the stalled upload cut", () => first.destroyed || first.readableEnded);
    expect(Buffer.concat(firstData).toString("latin1")).toMatch(/^HTTP\/1\.1 408 /);
    first.destroy();
    let metrics = "";
    await until("/metrics", async () => {
      const res = await fetch(`${cp.url}/metrics`).catch(() => null);
      metrics = res?.ok === true ? await res.text() : "";
      return metrics !== "";
    });
    expect(metrics).toContain("kvroute_http_connections_refused_total 1");
    expect(metrics).toContain('kvroute_http_requests_cut_total{reason="timeout"} 1');
    expect(metrics).toContain('kvroute_http_requests_cut_total{reason="aborted"} 0');
  });
});
