// A control plane the test steers: a real HTTP server on 127.0.0.1 that holds every /v1/sync
// long poll until the test answers it with a page of its choosing, and records (and answers, or
// holds) /v1/report. Leader and report-queue tests use it to produce exact orders of events.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { decodeReport, type Report } from "../../control-plane/src/reports/report-codec.ts";
import { encodeSyncPage, type SyncPage } from "../../control-plane/src/sync/sync-codec.ts";
import { createHost, type Host } from "../../host/host.ts";
import type { HostOptions } from "../../host/index.ts";
import type { WasmThread } from "../../host/thread.ts";

const WASM = new URL("../../build/kvroute.wasm", import.meta.url).pathname;

export interface Poll {
  epoch: bigint;
  version: bigint;
  headers: IncomingHttpHeaders;
  res: ServerResponse;
  answered: boolean;
}

export interface FakeControlPlane {
  address: string;
  polls: Poll[];
  reports: Report[];
  /** Reports waiting for an answer while holdReports is on. */
  heldReports: ServerResponse[];
  holdReports: boolean;
  /** Polls not answered yet whose connection is still open. */
  open(): Poll[];
  answer(poll: Poll, page: Omit<SyncPage, "flags"> & { flags?: number }): void;
  close(): Promise<void>;
}

export async function startFakeControlPlane(): Promise<FakeControlPlane> {
  const polls: Poll[] = [];
  const reports: Report[] = [];
  const heldReports: ServerResponse[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (url.pathname === "/v1/sync") {
        polls.push({
          epoch: BigInt(url.searchParams.get("epoch") ?? "0"),
          version: BigInt(url.searchParams.get("version") ?? "0"),
          headers: req.headers,
          res,
          answered: false,
        });
      } else if (url.pathname === "/v1/report") {
        reports.push(decodeReport(new Uint8Array(Buffer.concat(chunks))));
        if (cp.holdReports) heldReports.push(res);
        else res.writeHead(204).end();
      } else res.writeHead(404).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const cp: FakeControlPlane = {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    polls,
    reports,
    heldReports,
    holdReports: false,
    open: () => polls.filter((p) => !p.answered && !p.res.destroyed && !p.res.socket?.destroyed),
    answer(poll, page) {
      poll.answered = true;
      poll.res
        .writeHead(200, { "content-type": "application/octet-stream" })
        .end(Buffer.from(encodeSyncPage({ flags: 0, ...page })));
    },
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
  return cp;
}

/** The plugin configuration the filter gets (tick 100 ms, so the lease is 1 s). */
export function pluginConfig(extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    controlPlane: { cluster: "cp", authority: "cp.test", token: "token-A", timeoutMs: 600000 },
    tickMs: 100,
    reportMs: 500,
    gatewayId: "gw-test",
    ...extra,
  });
}

/** The filter in a host whose ticks and clock the test drives. */
export function manualHost(cp: FakeControlPlane, clock: () => number, o: Partial<HostOptions> = {}): Host {
  return createHost({
    wasm: WASM,
    threads: 3,
    vmId: "kvroute",
    rootId: "kvroute",
    pluginConfig: pluginConfig(),
    clusters: { cp: cp.address },
    allowOnHeadersStopIteration: true,
    ticks: "manual",
    clock,
    ...o,
  });
}

/** VMs with an outstanding /v1/sync call: the pollers. */
export function pollers(host: Host): WasmThread[] {
  return host.vms().filter((t) => [...t.httpCalls.values()].some((c) => c.path.startsWith("/v1/sync")));
}

/** The kvr.sync record: epoch and version the cache holds. */
export function syncState(host: Host): { epoch: bigint; version: bigint } | null {
  const v = host.sharedData("kvr.sync");
  if (v === null) return null;
  const b = Buffer.from(v.value);
  return { epoch: b.readBigUInt64LE(0), version: b.readBigUInt64LE(8) };
}

export const text = (host: Host, key: string): string | null => {
  const v = host.sharedData(key);
  return v === null ? null : Buffer.from(v.value).toString();
};

export const entry = (key: string, value: string) => ({ key, value: new Uint8Array(Buffer.from(value)) });
