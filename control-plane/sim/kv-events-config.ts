// vLLM's `--kv-events-config` JSON (KVEventsConfig), with its defaults, validated once at
// startup; and vLLM's per-rank endpoint rule (the port of a tcp endpoint is offset by the
// global DP rank; inproc endpoints get a `_dp<rank>` suffix).
import { z } from "zod";

export interface KvEventsConfig {
  enableKvCacheEvents: boolean;
  publisher: "zmq" | "null";
  endpoint: string;
  replayEndpoint: string | null;
  bufferSteps: number;
  hwm: number;
  maxQueueSize: number;
  topic: string;
}

const schema = z
  .object({
    enable_kv_cache_events: z.boolean().default(false),
    publisher: z.enum(["zmq", "null"]).optional(),
    endpoint: z.string().default("tcp://*:5557"),
    replay_endpoint: z.string().nullable().default(null),
    buffer_steps: z.number().int().positive().default(10_000),
    hwm: z.number().int().nonnegative().default(100_000),
    max_queue_size: z.number().int().positive().default(100_000),
    topic: z.string().default(""),
  })
  .strict();

export function parseKvEventsConfig(json: string): KvEventsConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (err) {
    throw new Error(`--kv-events-config is not valid JSON: ${(err as Error).message}`);
  }
  return fromRaw(raw);
}

/** Events enabled over ZMQ, vLLM's defaults for every field not given (what the demo and tests run). */
export function zmqKvEvents(o: {
  endpoint: string;
  replayEndpoint: string;
  topic: string;
  bufferSteps?: number;
}): KvEventsConfig {
  return fromRaw({
    enable_kv_cache_events: true,
    endpoint: o.endpoint,
    replay_endpoint: o.replayEndpoint,
    topic: o.topic,
    ...(o.bufferSteps === undefined ? {} : { buffer_steps: o.bufferSteps }),
  });
}

function fromRaw(raw: unknown): KvEventsConfig {
  const r = schema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new Error(`--kv-events-config: ${issue?.path.join(".") || "(root)"}: ${issue?.message}`);
  }
  const c = r.data;
  return {
    enableKvCacheEvents: c.enable_kv_cache_events,
    // vLLM: publisher defaults to "zmq" when events are enabled, else "null".
    publisher: c.publisher ?? (c.enable_kv_cache_events ? "zmq" : "null"),
    endpoint: c.endpoint,
    replayEndpoint: c.replay_endpoint,
    bufferSteps: c.buffer_steps,
    hwm: c.hwm,
    maxQueueSize: c.max_queue_size,
    topic: c.topic,
  };
}

/**
 * vLLM's ZmqEventPublisher.offset_endpoint_port: DP rank r publishes on `port + r` (tcp) or
 * `<endpoint>_dp<r>` (inproc); rank 0 keeps the endpoint. Written from vLLM's rule, apart from
 * the router's subscriber side (control-plane/src/events/endpoints.ts), so a wrong offset in
 * either shows up as a subscriber that hears nothing.
 */
export function offsetEndpointPort(endpoint: string, rank: number): string {
  if (rank === 0) return endpoint;
  if (endpoint.includes("inproc")) return `${endpoint}_dp${rank}`;
  if (endpoint.includes("tcp")) {
    const lastColon = endpoint.lastIndexOf(":");
    const basePort = Number.parseInt(endpoint.slice(lastColon + 1), 10);
    if (lastColon < 0 || !/^\s*[+-]?\d+\s*$/.test(endpoint.slice(lastColon + 1))) {
      throw new Error(`invalid KV event endpoint ${endpoint}: no port after the last ':'`);
    }
    return `${endpoint.slice(0, lastColon)}:${basePort + rank}`;
  }
  throw new Error(`invalid KV event endpoint ${endpoint}: must contain 'inproc' or 'tcp'`);
}

/** vLLM's ZmqEventPublisher binds its PUB socket for `*`, `::`, ipc:// and inproc://; else connects. */
export function publisherBinds(endpoint: string): boolean {
  if (endpoint.startsWith("ipc://") || endpoint.startsWith("inproc://")) return true;
  return endpoint.includes("*") || endpoint.includes("::");
}
