// The EPP as a part of the control plane (app.ts starts it when the configuration has `epp`):
// the embedded filter reaches this control plane's HTTP listener on loopback, shares its
// in-flight accounting through the same report handler as every gateway, and is ready once it
// synced this run's epoch.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Config, EppConfig } from "../config/schema.ts";
import type { LoadModel } from "../model/slot-load.ts";
import type { SlotTable } from "../model/slot-table.ts";
import { BodySendMode } from "./messages.ts";
import { OBJECTIVE_HEADERS } from "./objective.ts";
import { watchEppResources } from "./resource-watch.ts";
import { type Epp, startEpp } from "./server.ts";

const SHIPPED_WASM = new URL("../../../build/kvroute.wasm", import.meta.url).pathname;

export interface EppPartInput {
  /** The control plane's bound HTTP address (host, port). */
  httpHost: string;
  httpPort: number;
  epoch: bigint;
  ready(): boolean;
  slots: SlotTable;
  load: LoadModel;
  logger: Logger;
  /** The embedded filter's gateway id (default kvroute-epp). */
  gatewayId?: string;
  /** The module to run (tests); default build/kvroute.wasm. */
  wasm?: string;
  /** The cluster to watch `epp.resources` in (tests); default the in-cluster / kubeconfig one. */
  kubeConfig?: KubeConfig;
}

/** The loopback address of a listener bound to `host` (a wildcard bind is reached on loopback). */
export function loopbackOf(host: string, port: number): string {
  if (host === "0.0.0.0" || host === "") return `127.0.0.1:${port}`;
  if (host === "::" || host === "[::]") return `[::1]:${port}`;
  return host.includes(":") && !host.startsWith("[") ? `[${host}]:${port}` : `${host}:${port}`;
}

export async function startEppPart(cfg: Config, epp: EppConfig, input: EppPartInput): Promise<Epp> {
  let next = 0;
  const watched = epp.resources;
  const picker = await startEpp({
    listen: epp.listen,
    ...(epp.healthListen === undefined ? {} : { healthListen: epp.healthListen }),
    ...(epp.tls === undefined ? {} : { tls: epp.tls }),
    filter: {
      wasm: input.wasm ?? SHIPPED_WASM,
      controlPlane: loopbackOf(input.httpHost, input.httpPort),
      ...(cfg.authToken === undefined ? {} : { token: cfg.authToken }),
      longPollMs: cfg.sync.longPollMs,
      maxBodyBytes: cfg.routing.maxBodyBytes,
      destinationFallbacks: epp.destinationFallbacks,
      seed: epp.seed,
      ...(input.gatewayId === undefined ? {} : { gatewayId: input.gatewayId }),
    },
    requestBodyMode: BodySendMode[epp.requestBodyMode],
    responseBodyMode: BodySendMode[epp.responseBodyMode],
    controlPlaneReady: input.ready,
    epoch: input.epoch,
    // Requests the filter does not route (GET /v1/models …): the healthy slots in turn.
    anyEndpoint: () => {
      const healthy = input.slots.present().filter((s) => input.load.get(s.id).healthy);
      if (healthy.length === 0) return null;
      return (healthy[next++ % healthy.length] as (typeof healthy)[number]).address;
    },
    subsetMatch: epp.subsetMatch,
    pool: watched === undefined ? null : { name: watched.inferencePool, group: watched.poolGroup },
    endpoints: () => [...new Set(input.slots.present().map((s) => s.address))],
    objectives: {
      objectiveHeaders: epp.objectiveHeader === undefined ? OBJECTIVE_HEADERS : [epp.objectiveHeader],
      priorityHeader: cfg.routing.priorityHeader,
      priorities: new Map(epp.objectives.map((o) => [o.name, o.priority])),
    },
    logger: input.logger,
  });
  if (watched === undefined) return picker;
  const watch = watchEppResources(picker.resources, {
    namespace: watched.namespace,
    group: watched.group,
    version: watched.version,
    logger: input.logger,
    ...(input.kubeConfig === undefined ? {} : { kubeConfig: input.kubeConfig }),
  });
  const close = picker.close.bind(picker);
  return {
    ...picker,
    async close() {
      await watch.stop();
      await close();
    },
  };
}
