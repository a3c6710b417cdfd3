// Loads kvroute's own copies of the ext_proc and gRPC health protos (proto/, written from
// Envoy's and gRPC's published definitions: the image ships no dev dependency, so the Envoy API
// copy inside @grpc/grpc-js-xds is not available at run time) and turns them into grpc-js
// service definitions. A request that does not decode is handed to the handler as a
// `MalformedMessage` instead of failing inside grpc-js (which would answer INTERNAL), so the
// handler can answer INVALID_ARGUMENT and say why.
import type { ServiceDefinition } from "@grpc/grpc-js";
import { loadSync, type MethodDefinition } from "@grpc/proto-loader";
import { decodeTimes, nowUs } from "./timing.ts";

const PROTO_DIR = new URL("./proto", import.meta.url).pathname;

const LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: Number,
  bytes: Buffer,
  defaults: false,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

export class MalformedMessage {
  constructor(readonly reason: string) {}
}

const definitions = loadSync(
  ["envoy/service/ext_proc/v3/external_processor.proto", "grpc/health/v1/health.proto"],
  LOADER_OPTIONS,
);

function service(name: string): ServiceDefinition {
  const def = definitions[name] as unknown as Record<string, MethodDefinition<object, object>> | undefined;
  if (def === undefined) throw new Error(`proto service ${name} missing`);
  const out: Record<string, MethodDefinition<object, object>> = {};
  for (const [method, m] of Object.entries(def)) {
    const decode = m.requestDeserialize;
    out[method] = {
      ...m,
      requestDeserialize: (bytes: Buffer) => {
        const t0 = nowUs();
        try {
          const msg = decode(bytes) as object;
          decodeTimes.set(msg, nowUs() - t0);
          return msg;
        } catch (err) {
          return new MalformedMessage(err instanceof Error ? err.message : String(err));
        }
      },
    };
  }
  return out as unknown as ServiceDefinition;
}

export const EXT_PROC_SERVICE = "envoy.service.ext_proc.v3.ExternalProcessor";
export const HEALTH_SERVICE = "grpc.health.v1.Health";

export const extProcService = service(EXT_PROC_SERVICE);
export const healthService = service(HEALTH_SERVICE);
/** Unwrapped definitions, for clients (tests, the bench) that speak the same protos. */
export const protoDefinitions = definitions;
