// The same stack with a real Envoy in front (envoy/envoy.yaml, build/kvroute.wasm), when an
// Envoy ≥ 1.35 binary is available: ENVOY_BIN=/path/to/envoy npm run test:envoy. No registry
// ships Envoy, so on machines without it this suite says so and does not run.
import { type ChildProcess, spawn } from "node:child_process";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { zmqKvEvents } from "../../control-plane/sim/kv-events-config.ts";
import { type RunningSim, startSim } from "../../control-plane/sim/server.ts";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { writeEnvoyConfig } from "../../control-plane/src/cli/envoy-config.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { freePortRange, QWEN3, simConfig } from "../sim/helpers.ts";

const ENVOY = process.env.ENVOY_BIN;
if (ENVOY === undefined) {
  console.warn(
    "test/e2e/envoy.test.ts: not run — set ENVOY_BIN to an Envoy >= 1.35 binary (none can be installed from a registry here)",
  );
}

describe.skipIf(ENVOY === undefined)("real Envoy", () => {
  const TOKEN = "envoy-e2e-token-0123456789";
  let sim: RunningSim;
  let cp: ControlPlane;
  let envoy: ChildProcess;
  let base = 0;
  let url = "";
  const stat = async (name: string) => {
    const text = await (
      await fetch(`http://127.0.0.1:${base + 1}/stats?filter=${encodeURIComponent(name)}`)
    ).text();
    return Number(/: (\d+)/.exec(text)?.[1] ?? 0);
  };

  beforeAll(async () => {
    base = await freePortRange(4);
    const zmq = await freePortRange(20);
    sim = await startSim(
      simConfig({
        model: "qwen3",
        port: base + 2,
        tokenizerDir: QWEN3,
        topology: { mode: "internal", size: 2, sizeLocal: 2, startRank: 0 },
        kvEvents: zmqKvEvents({
          endpoint: `tcp://*:${zmq}`,
          replayEndpoint: `tcp://*:${zmq + 10}`,
          topic: "kv",
          bufferSteps: 1000,
        }),
      }),
    );
    cp = await startControlPlane(
      parseConfig(
        {
          authToken: TOKEN,
          pools: [
            {
              name: "qwen",
              models: ["qwen3"],
              tokenizer: QWEN3,
              endpoints: [
                {
                  address: `127.0.0.1:${base + 2}`,
                  ranks: [0, 1],
                  kvEvents: {
                    endpoint: `tcp://*:${zmq}`,
                    replayEndpoint: `tcp://*:${zmq + 10}`,
                    topic: "kv",
                  },
                },
              ],
            },
          ],
          sync: { longPollMs: 500 },
        },
        "envoy-e2e",
        {},
      ),
      { listen: `127.0.0.1:${base + 3}`, logger: pino({ level: "silent" }) },
    );
    const config = writeEnvoyConfig({
      listenPort: base,
      adminPort: base + 1,
      controlPlane: `127.0.0.1:${base + 3}`,
      fallback: `127.0.0.1:${base + 2}`,
      token: TOKEN,
      wasm: new URL("../../build/kvroute.wasm", import.meta.url).pathname,
    });
    envoy = spawn(ENVOY as string, ["-c", config, "--log-level", "warn", "--concurrency", "2"], {
      stdio: "inherit",
    });
    url = `http://127.0.0.1:${base}`;
    const end = Date.now() + 30_000;
    while (Date.now() < end) {
      if ((await stat("wasmcustom.kvroute.sync.version").catch(() => 0)) > 0) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error("Envoy did not sync from the control plane within 30 s");
  }, 60_000);

  afterAll(async () => {
    envoy?.kill("SIGTERM");
    await cp?.stop();
    await sim?.close();
  });

  const chat = async (system: string, user: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({
        model: "qwen3",
        messages: [
          { role: "system", content: system },
          { role: "user", content: user },
        ],
        max_tokens: 4,
      }),
    });
    await res.text();
    return {
      status: res.status,
      rank: res.headers.get("x-kvroute-sim-rank"),
      cached: Number(res.headers.get("x-kvroute-sim-cached-tokens") ?? 0),
    };
  };

  it("routes a shared prefix to the rank that cached it", async () => {
    const system = "You are a precise assistant for GPU fleet operators. ".repeat(30);
    const first = await chat(system, "first");
    expect(first.status).toBe(200);
    await new Promise((r) => setTimeout(r, 1500));
    const second = await chat(system, "second");
    expect(second.rank).toBe(first.rank);
    expect(second.cached).toBeGreaterThan(0);
    expect(await stat("wasmcustom.kvroute.requests.no_body_access")).toBe(0);
  });

  it("ignores a client's destination header", async () => {
    const r = await chat("s", "u", { "x-gateway-destination-endpoint": "127.0.0.1:1" });
    expect(r.status).toBe(200);
  });
});
