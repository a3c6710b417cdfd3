// The shipped filter (build/kvroute.wasm) inside this process, in the Node Proxy-Wasm host
// (host/, Envoy's semantics), configured as any gateway's filter would be: its control-plane
// cluster is this control plane's own HTTP listener on loopback, so its leader long-polls
// /v1/sync and posts /v1/report exactly like an Envoy's. The EPP's requests are therefore routed
// by the same code, from the same shared-data images, with the same in-flight accounting.
//
// Why loopback sync and not direct writes into the host's shared data: the filter's leader
// writes every sync page and the kvr.sync state itself, on its own schedule; a second writer of
// the same keys would race it (an older page applied after a newer direct write sets keys back
// until the next poll). The long poll answers as soon as the control plane publishes (every few
// ms), so the lag is one loopback HTTP round trip; operations.md gives the numbers.
import { existsSync } from "node:fs";
import { createHost, type FilterChainSink, type Host, type HttpStream } from "../../../host/index.ts";

export interface EmbeddedFilterOptions {
  /** The shipped module. */
  wasm: string;
  /** This control plane's HTTP listener, as the filter's cluster reaches it (host:port). */
  controlPlane: string;
  token?: string;
  /** The control plane's sync.longPollMs: the filter's call timeout must exceed it. */
  longPollMs: number;
  /** The filter's maxBodyBytes (the control plane's routing.maxBodyBytes). */
  maxBodyBytes: number;
  /** Filter tick (ms): cache refresh and in-flight publication. */
  tickMs?: number;
  /** How often the embedded filter's leader reports (ms). */
  reportMs?: number;
  /** Inference paths the filter routes (its plugin configuration). */
  inferencePaths?: string[];
  gatewayId?: string;
  /** Fallback endpoints after the best one in the destination (GAIE's ordered list). */
  destinationFallbacks?: number;
  /** The filter's `seed` (0: each thread its own). */
  seed?: number;
}

export const CONTROL_PLANE_CLUSTER = "kvroute_control_plane";
export const DEFAULT_INFERENCE_PATHS = ["/v1/completions", "/v1/chat/completions"];
const MIB = 1024 * 1024;

export class EmbeddedFilter {
  readonly host: Host;
  readonly inferencePaths: string[];

  constructor(opts: EmbeddedFilterOptions) {
    if (!existsSync(opts.wasm))
      throw new Error(`epp: the filter module ${opts.wasm} does not exist (npm run build)`);
    this.inferencePaths = opts.inferencePaths ?? DEFAULT_INFERENCE_PATHS;
    const pluginConfig = {
      controlPlane: {
        cluster: CONTROL_PLANE_CLUSTER,
        authority: opts.controlPlane,
        token: opts.token ?? "",
        timeoutMs: opts.longPollMs + 5000,
      },
      tickMs: opts.tickMs ?? 20,
      reportMs: opts.reportMs ?? 100,
      maxBodyBytes: opts.maxBodyBytes,
      // No cache yet → 503 from the filter itself: a GAIE gateway has no fallback upstream.
      failMode: "closed",
      inferencePaths: this.inferencePaths,
      destinationFallbacks: opts.destinationFallbacks ?? 0,
      seed: opts.seed ?? 0,
      gatewayId: opts.gatewayId ?? "kvroute-epp",
    };
    this.host = createHost({
      wasm: opts.wasm,
      threads: 1,
      mainThread: false,
      vmId: "kvroute",
      rootId: "kvroute",
      pluginName: "kvroute",
      pluginConfig: JSON.stringify(pluginConfig),
      clusters: { [CONTROL_PLANE_CLUSTER]: opts.controlPlane },
      // The body is in the filter before routing (Envoy ≥ 1.35 with the flag, as deployed).
      allowOnHeadersStopIteration: true,
      // The buffer-limit invariant (docs/deploy-envoy.md): room for maxBodyBytes + 1 MiB.
      bufferLimitBytes: opts.maxBodyBytes + MIB,
      // As Envoy ≥ 1.33 by default: a trap fails its request, the next one gets a fresh VM.
      failurePolicy: "FAIL_RELOAD",
      logLevel: 3,
    });
  }

  newStream(
    sink: FilterChainSink,
    source: { address: string; port: number },
    metadata: Record<string, Record<string, unknown>> = {},
  ): HttpStream {
    return this.host.newStream(this.host.pickThread(), sink, {
      sourceAddress: source.address,
      sourcePort: source.port,
      dynamicMetadata: metadata,
    });
  }

  /** The (epoch, version) of the routing cache the filter holds, or null before its first sync. */
  cacheVersion(): { epoch: bigint; version: bigint } | null {
    const v = this.host.sharedData("kvr.sync");
    if (v === null || v.value.length < 16) return null;
    const b = Buffer.from(v.value.buffer, v.value.byteOffset, v.value.byteLength);
    return { epoch: b.readBigUInt64LE(0), version: b.readBigUInt64LE(8) };
  }

  /** Request bodies the filter could not parse as JSON (its `kvroute.parse_errors` counter). */
  parseErrors(): bigint {
    return this.host.counter("kvroute.parse_errors") ?? 0n;
  }

  isInference(method: string, path: string): boolean {
    const q = path.indexOf("?");
    return method === "POST" && this.inferencePaths.includes(q < 0 ? path : path.slice(0, q));
  }

  close(): void {
    this.host.close();
  }
}
