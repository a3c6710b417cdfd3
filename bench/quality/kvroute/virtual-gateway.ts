// One gateway of the quality bench: the Node Proxy-Wasm host (Envoy's semantics, host/) running
// build/kvroute.wasm in several worker-thread VMs plus Envoy's main-thread VM, on the virtual
// clock. Each VM ticks on its own period (the filter's tickMs), staggered as independent timers
// are; the control-plane cluster is served in-process by the virtual control plane. A request
// goes to the next worker thread (round robin, as connections spread over Envoy's workers): its
// headers and body through the filter, the destination and rank header the filter wrote pick
// the simulated engine, and the response's first byte and end reach the filter when the
// simulated engine produces them.
import type { ClusterHandler } from "../../../host/core.ts";
import type { HeaderMap } from "../../../host/header-map.ts";
import { createHost, type Host, headers } from "../../../host/host.ts";
import type { FilterChainSink, HttpStream } from "../../../host/stream.ts";
import type { WasmThread } from "../../../host/thread.ts";
import type { VirtualTimers } from "./virtual-timers.ts";

export const CONTROL_PLANE_CLUSTER = "kvroute_control_plane";

export interface VirtualGatewayOptions {
  name: string;
  wasm: Uint8Array;
  /** Worker threads (Envoy --concurrency). */
  threads: number;
  pluginConfig: string;
  controlPlane: ClusterHandler;
  timers: VirtualTimers;
  clock: () => number;
  /** Offset of this gateway's tick phases (ms), so gateways do not tick in lockstep. */
  phaseMs: number;
}

/** What the router after the filter received, or the filter's local answer. */
class ChainEnd implements FilterChainSink {
  forwarded: HeaderMap | null = null;
  localStatus = 0;
  requestHeaders(h: HeaderMap): void {
    this.forwarded = h;
  }
  requestData(): void {}
  requestTrailers(): void {}
  abortUpstream(): void {}
  responseHeaders(h: HeaderMap): void {
    if (this.forwarded === null) this.localStatus = Number(h.get(":status") ?? 0);
  }
  responseData(): void {}
  responseTrailers(): void {}
  resetDownstream(): void {}
  done(): void {}
}

export interface Routed {
  stream: HttpStream;
  /** The headers that reached the router (destination, rank header); null after a local answer. */
  forwarded: HeaderMap | null;
  localStatus: number;
}

const FIRST_CHUNK = new TextEncoder().encode('data: {"choices":[{"delta":{"content":"x"}}]}\n\n');
const LAST_CHUNK = new TextEncoder().encode("data: [DONE]\n\n");

export class VirtualGateway {
  readonly host: Host;

  constructor(readonly o: VirtualGatewayOptions) {
    this.host = createHost({
      wasm: o.wasm,
      threads: o.threads,
      vmId: "kvroute",
      rootId: "kvroute",
      pluginConfig: o.pluginConfig,
      node: { id: o.name },
      clusterHandlers: { [CONTROL_PLANE_CLUSTER]: o.controlPlane },
      // kvroute needs it (Envoy ≥ 1.35): headers wait while the body reaches the filter.
      allowOnHeadersStopIteration: true,
      ticks: "manual",
      clock: o.clock,
    });
    const vms = this.host.vms();
    for (const [k, vm] of vms.entries()) {
      const period = Math.max(...vm.tickingRoots().map((id) => vm.roots.get(id)?.tickMs ?? 0), 0);
      if (period <= 0) continue;
      const first = o.timers.now + o.phaseMs + ((k + 1) * period) / (vms.length + 1);
      o.timers.every(first, period, () => {
        this.host.tick({ vms: [vm] });
        this.drain();
        return true;
      });
    }
  }

  /** Runs what the VMs' dispatchers have queued (http-call answers, queue wake-ups), in order. */
  drain(): void {
    let ran = true;
    while (ran) {
      ran = false;
      for (const t of this.host.vms()) while (t.runOneTask()) ran = true;
    }
  }

  /** A chat request arrives: headers (plus `extra`) and body through the filter on the next worker thread. */
  send(id: string, body: Uint8Array, extra: Array<[string, string]> = []): Routed {
    const thread: WasmThread = this.host.pickThread();
    const end = new ChainEnd();
    const stream = this.host.newStream(thread, end, { sourceAddress: "10.1.0.1" });
    stream.decodeHeaders(
      headers([
        [":method", "POST"],
        [":path", "/v1/chat/completions"],
        [":authority", "gateway.bench"],
        [":scheme", "http"],
        ["content-type", "application/json"],
        ["content-length", String(body.length)],
        ["x-request-id", id],
        ...extra,
      ]),
      false,
    );
    stream.decodeData(body, true);
    this.drain();
    return { stream, forwarded: end.forwarded, localStatus: end.localStatus };
  }

  /** The engine's first token: response headers and the first SSE event through the filter. */
  firstByte(stream: HttpStream): void {
    stream.encodeHeaders(
      headers([
        [":status", "200"],
        ["content-type", "text/event-stream"],
      ]),
      false,
    );
    stream.encodeData(FIRST_CHUNK, false);
    this.drain();
  }

  /** The engine's last token: the stream ends (on_log, on_done, on_delete). */
  finish(stream: HttpStream): void {
    stream.encodeData(LAST_CHUNK, true);
    this.drain();
  }

  counter(name: string): number {
    return Number(this.host.counter(name) ?? 0);
  }

  close(): void {
    this.host.close();
  }
}
