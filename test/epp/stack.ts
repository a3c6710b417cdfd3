// A control plane with its endpoint picker on loopback, in front of fake engines that echo what
// reached them (test/filter/harness.ts) or of simulated vLLM workers, and an Envoy-like ext_proc
// client pointed at the picker.
import { pino } from "pino";
import {
  type ControlPlane,
  type ControlPlaneOptions,
  startControlPlane,
} from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { type FakeEngine, QWEN, startEngine, TOKEN, until } from "../filter/harness.ts";
import { EnvoyExtProc, forward, type UpstreamAnswer } from "./envoy-ext-proc.ts";

export { QWEN, TOKEN, until };

export interface EppStack {
  cp: ControlPlane;
  engines: FakeEngine[];
  client: EnvoyExtProc;
  close(): Promise<void>;
}

export interface EppStackOptions {
  engines?: number[][];
  pools?: (engines: FakeEngine[]) => unknown[];
  routing?: Record<string, unknown>;
  epp?: Record<string, unknown>;
  /** Added to the control plane's start options (e.g. the cluster the picker watches). */
  controlPlane?: Partial<ControlPlaneOptions>;
  /** Runs after the engines started, before the control plane does. */
  beforeStart?: (engines: FakeEngine[]) => void;
}

export async function startEppStack(o: EppStackOptions = {}): Promise<EppStack> {
  const engines = await Promise.all((o.engines ?? [[0, 1, 2, 3]]).map((ranks) => startEngine(ranks)));
  o.beforeStart?.(engines);
  const pools = o.pools?.(engines) ?? [
    {
      name: "qwen",
      models: ["qwen3"],
      tokenizer: QWEN,
      endpoints: engines.map((e) => ({ address: e.address, ranks: Object.keys(e.running).map(Number) })),
    },
  ];
  const cfg = parseConfig(
    {
      authToken: TOKEN,
      pools,
      routing: o.routing ?? {},
      cache: { buckets: 256, ways: 16, speculativeTtlMs: 60_000 },
      load: { scrapeIntervalMs: 50, unhealthyAfter: 2 },
      sync: { longPollMs: 300 },
      epp: o.epp ?? {},
    },
    "test",
    {},
  );
  const cp = await startControlPlane(cfg, {
    listen: "127.0.0.1:0",
    eppListen: "127.0.0.1:0",
    logger: pino({ level: "silent" }),
    ...o.controlPlane,
  });
  if (cp.epp === null) throw new Error("no endpoint picker");
  const client = new EnvoyExtProc(cp.epp.address);
  return {
    cp,
    engines,
    client,
    async close() {
      client.close();
      await cp.stop();
      for (const e of engines) {
        e.server.closeAllConnections();
        await new Promise((r) => e.server.close(r));
      }
    },
  };
}

/** The embedded filter holds the control plane's newest version. */
export async function eppSynced(cp: ControlPlane): Promise<void> {
  cp.publish();
  const want = BigInt(cp.log.version);
  await until(() => {
    const v = cp.epp?.filter.cacheVersion();
    return v != null && v.epoch === cp.epoch && v.version >= want;
  }, `endpoint picker sync to version ${want}`);
}

export function chatBody(system: string, user: string, model = "qwen3", extra: Record<string, unknown> = {}) {
  return JSON.stringify({
    model,
    messages: [
      { role: "system", content: system },
      { role: "user", content: user },
    ],
    max_tokens: 4,
    ...extra,
  });
}

export const JSON_HEADERS: Array<[string, string]> = [["content-type", "application/json"]];

/** The upstream as Envoy's router reaches it, failing the test if there is no destination. */
export const upstream: (h: Array<[string, string]>, b: Buffer) => Promise<UpstreamAnswer> = forward;

export function header(pairs: Array<[string, string]>, name: string): string | undefined {
  return pairs.find(([k]) => k === name)?.[1];
}
