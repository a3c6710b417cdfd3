// Starts OpenTelemetry tracing for this process with @opentelemetry/sdk-node, configured the
// standard way: OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT),
// OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf by default, grpc, http/json), OTEL_TRACES_SAMPLER,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_SDK_DISABLED … (docs/operations.md
// "Tracing"). Off unless an exporter or an endpoint is named: a control plane nobody collects
// traces from should not retry exports to localhost:4318 forever. Traces only: the metrics stay
// on /metrics (Prometheus), logs on stdout. No auto-instrumentation: the spans are kvroute's own
// (tracing/*.ts), not one per long poll of every HTTP library.
// The SDK is loaded only when tracing is wanted: it is a large module graph a control plane
// without traces should not pay for at start.

export interface Tracing {
  /** Exports what is buffered, then stops. */
  shutdown(): Promise<void>;
}

const DEFAULT_SERVICE_NAME = "kvroute-control-plane";

/** Whether the environment asks for traces (and does not disable the SDK). */
export function tracingWanted(env: NodeJS.ProcessEnv): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return false;
  const exporters = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporters !== undefined && exporters !== "") return exporters !== "none";
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

let started = false;

/** Whether this process exports traces: parts that would only make spans for it check first. */
export function tracingStarted(): boolean {
  return started;
}

/** Starts the SDK when the environment asks for traces; null otherwise (the API stays no-op). */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<Tracing | null> {
  if (!tracingWanted(env) || started) return null;
  const { NodeSDK } = await import("@opentelemetry/sdk-node");
  const sdk = new NodeSDK({
    ...(env.OTEL_SERVICE_NAME ? {} : { serviceName: DEFAULT_SERVICE_NAME }),
    instrumentations: [],
    // Traces only, whatever OTEL_METRICS_EXPORTER / OTEL_LOGS_EXPORTER default to.
    logRecordProcessors: [],
  });
  sdk.start();
  started = true;
  return {
    async shutdown() {
      await sdk.shutdown();
      started = false;
    },
  };
}
