// The control plane's configuration schema (YAML on disk, validated with zod). Every field
// has a default where a safe one exists, so the smallest useful file names one pool and one
// endpoint. docs/configuration.md is the reference; keep the two in step.
import { existsSync } from "node:fs";
import { isIP } from "node:net";
import { z } from "zod";
import { HTTP_LIMIT_DEFAULTS } from "../common/http-limits.ts";

const hostPort = z
  .string()
  .regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, "expected host:port (IPv6 in brackets)")
  .refine((s) => Number(s.slice(s.lastIndexOf(":") + 1)) <= 65535, "port out of range");

const zmqEndpoint = z
  .string()
  .regex(
    /^(tcp:\/\/(\*|\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}|ipc:\/\/.+|inproc:\/\/.+)$/,
    "expected a ZMQ endpoint such as tcp://10.0.0.5:5557",
  );

const rank = z.number().int().min(0).max(4095);

/** Where a rank's KV events come from. The port is the base: rank r publishes on port + r (vLLM and SGLang). */
const kvEventsSchema = z.strictObject({
  endpoint: zmqEndpoint,
  replayEndpoint: zmqEndpoint.optional(),
  topic: z.string().default(""),
});

const endpointSchema = z.strictObject({
  /**
   * The engine's HTTP address as the gateway reaches it: a literal ip:port, one of the endpoints of
   * the route's cluster (override_host honours only those; an ORIGINAL_DST cluster needs a literal).
   */
  address: hostPort,
  /** Global DP ranks this server serves, or "auto" to read them from /metrics `engine` labels. */
  ranks: z.union([z.literal("auto"), z.array(rank).min(1)]).default("auto"),
  /** First global rank of a hybrid-LB server (vLLM --data-parallel-start-rank); header = rank - startRank. */
  startRank: rank.optional(),
  role: z.enum(["aggregated", "prefill", "decode"]).default("aggregated"),
  /** Dynamo worker instance id (decimal string, u64); derived from the pod name in Kubernetes discovery. */
  workerId: z
    .string()
    .regex(/^\d{1,20}$/, "expected a decimal u64")
    .optional(),
  kvEvents: kvEventsSchema.optional(),
  /** Where /metrics is scraped; defaults to http://<address>/metrics. */
  metricsUrl: z.url().optional(),
});

/** A Kubernetes object name (RFC 1123 label; Services and namespaces are labels). */
const k8sName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, "expected a Kubernetes name (RFC 1123 label)");
const k8sLabelKey = z
  .string()
  .regex(
    /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/,
    "expected a label key such as app or example.com/role",
  );
const k8sLabelValue = z
  .string()
  .regex(/^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/, "expected a label value (≤ 63 characters)");
const tcpPort = z.number().int().min(1).max(65535);

/**
 * Endpoints from Kubernetes, shaped like GAIE's InferencePool: pods chosen by a label selector
 * in one namespace, one or more target ports per pod. Readiness and addresses come from the
 * EndpointSlices of `service` (docs/configuration.md, "Kubernetes discovery").
 */
const kubernetesDiscoverySchema = z
  .strictObject({
    namespace: k8sName,
    /** The Service whose EndpointSlices (label kubernetes.io/service-name) list the pods' addresses and readiness. */
    service: k8sName,
    /** Pods of the pool, as InferencePool.spec.selector; endpoints of other pods behind the Service are ignored. */
    selector: z.strictObject({
      matchLabels: z
        .record(k8sLabelKey, k8sLabelValue)
        .refine((m) => Object.keys(m).length > 0, "at least one label"),
    }),
    /** One HTTP port per pod; its ranks come from /metrics (or the kvroute.io/ranks annotation). */
    port: tcpPort.optional(),
    /** External LB: one port per rank; port i serves rank start-rank + i (InferencePool allows up to 8). */
    targetPorts: z.array(tcpPort).min(1).max(8).optional(),
    /** The engines' --kv-events-config, the same for every pod of the pool. */
    kvEvents: kvEventsSchema.optional(),
    /** Path of the engines' Prometheus page on each target port. */
    metricsPath: z
      .string()
      .regex(/^\/[^\s?#]*$/, "expected an absolute path such as /metrics")
      .default("/metrics"),
  })
  .superRefine((k, ctx) => {
    if ((k.port === undefined) === (k.targetPorts === undefined))
      ctx.addIssue({ code: "custom", path: ["port"], message: "set exactly one of port and targetPorts" });
    if (k.targetPorts !== undefined && new Set(k.targetPorts).size !== k.targetPorts.length)
      ctx.addIssue({ code: "custom", path: ["targetPorts"], message: "target ports must be distinct" });
  });

/**
 * Endpoints from a GAIE InferencePool (inference.networking.k8s.io/v1) in the cluster: its
 * selector picks the pods, its targetPorts are the ports (each port a rank when there are
 * several); pods are ready by their own Ready condition (docs/gaie.md).
 */
const inferencePoolDiscoverySchema = z.strictObject({
  namespace: k8sName,
  name: k8sName,
  /** The engines' --kv-events-config, the same for every pod of the pool. */
  kvEvents: kvEventsSchema.optional(),
  metricsPath: z
    .string()
    .regex(/^\/[^\s?#]*$/, "expected an absolute path such as /metrics")
    .default("/metrics"),
});

const discoverySchema = z
  .strictObject({
    kubernetes: kubernetesDiscoverySchema.optional(),
    inferencePool: inferencePoolDiscoverySchema.optional(),
  })
  .refine((d) => (d.kubernetes === undefined) !== (d.inferencePool === undefined), {
    message: "set exactly one of kubernetes and inferencePool",
  });

/**
 * A priority level's saturation thresholds (docs/configuration.md "Overload shedding"): a slot is
 * saturated for the level when either value is over its threshold. Each level has its own
 * defaults, so a partial block keeps the other field's.
 */
const saturation = (maxQueued: number, maxKvUsage: number) =>
  z.strictObject({
    /** Requests queued ahead of a new one: the engine's `waiting` plus the gateways' unanswered requests there. */
    maxQueued: z.number().int().min(0).max(65535).default(maxQueued),
    /** The engine's KV-cache usage, 0–1 (sent per mille); 1 = never saturated by KV alone. */
    maxKvUsage: z.number().min(0).max(1).default(maxKvUsage),
  });

const standardSaturation = saturation(16, 0.95);
const sheddableSaturation = saturation(4, 0.85);

/**
 * Overload shedding: when every candidate slot of the pool is saturated for the request's priority,
 * the filter answers 429 with Retry-After instead of routing. `critical` is never shed; `sheddable`
 * is shed first (its thresholds may not be above standard's). Off by default.
 */
const sheddingSchema = z
  .strictObject({
    enabled: z.boolean().default(false),
    /** The Retry-After value of a 429, in seconds. */
    retryAfterSeconds: z.number().int().min(1).max(3600).default(1),
    standard: standardSaturation.default(standardSaturation.parse({})),
    sheddable: sheddableSaturation.default(sheddableSaturation.parse({})),
  })
  .superRefine((s, ctx) => {
    for (const field of ["maxQueued", "maxKvUsage"] as const)
      if (s.sheddable[field] > s.standard[field])
        ctx.addIssue({
          code: "custom",
          path: ["sheddable", field],
          message: `must not be above standard.${field} (${s.standard[field]}): sheddable requests are shed first`,
        });
  });

/**
 * A LoRA adapter's served name (vLLM `--lora-modules name=path`): what a request puts in `model`
 * and what KV events carry as `lora_name`. Bounded because the name goes into shared data and into
 * every chunk hash of its requests; printable ASCII without quotes or backslashes, so it never
 * needs JSON escapes and compares byte for byte with the request's `model`.
 */
export const ADAPTER_NAME = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$/;
/** Adapters one pool may know (configured and discovered together): the cfg image's table. */
export const MAX_POOL_ADAPTERS = 256;
const adapterName = z.string().regex(ADAPTER_NAME, "1-128 characters: letters, digits and . _ : / @ + -");

const poolSchema = z
  .strictObject({
    name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "lowercase letters, digits and dashes"),
    /** Model names the pool serves; the first is canonical and seeds every chunk hash (wire-format §3). */
    models: z.array(z.string().min(1)).min(1),
    engine: z.enum(["vllm", "sglang", "dynamo"]).default("vllm"),
    /** vLLM's DP deployment mode (REFERENCE §1.2); decides what the rank header carries. */
    dpMode: z.enum(["internal", "hybrid", "external"]).default("internal"),
    /** Directory with tokenizer.json and tokenizer_config.json. Without it the pool routes by load and speculative affinity only. */
    tokenizer: z.string().min(1).optional(),
    /** The engines' KV block size (--block-size). */
    blockSize: z.number().int().min(1).max(4096).default(16),
    policy: z.enum(["kv-aware", "least-load", "round-robin", "random"]).default("kv-aware"),
    /** Use only these global ranks of every endpoint (selective ranks); default all. */
    useRanks: z.array(rank).min(1).optional(),
    /** SGLang: also write `routed_dp_rank` into the JSON body. */
    sglangBodyRank: z.boolean().default(false),
    /** Dynamo: also send the pre-2026 header names (x-worker-instance-id, x-dp-rank, …). */
    dynamoLegacyHeaders: z.boolean().default(false),
    endpoints: z.array(endpointSchema).default([]),
    /** Where endpoints come from when not listed in `endpoints`. */
    discovery: discoverySchema.optional(),
    shedding: sheddingSchema.default(sheddingSchema.parse({})),
    /**
     * LoRA adapters served over the pool's base model (docs/configuration.md "LoRA adapters"): a
     * request whose `model` names one goes to this pool and is hashed with the adapter's name.
     * The engines' /v1/models adds the adapters they list with a `parent` among `models`.
     */
    adapters: z.array(adapterName).max(MAX_POOL_ADAPTERS).default([]),
  })
  .superRefine((pool, ctx) => {
    const k8s = pool.discovery?.kubernetes;
    if (pool.discovery !== undefined && pool.endpoints.length > 0)
      ctx.addIssue({
        code: "custom",
        path: ["endpoints"],
        message: "a pool takes its endpoints either from `endpoints` or from `discovery`, not both",
      });
    // Several ports per pod only make sense when each port is one engine serving one rank.
    if (k8s?.targetPorts !== undefined && pool.dpMode !== "external")
      ctx.addIssue({
        code: "custom",
        path: ["discovery", "kubernetes", "targetPorts"],
        message: "targetPorts (one port per rank) need dpMode: external; use port for one server per pod",
      });
    const seen = new Set<string>();
    pool.endpoints.forEach((e, i) => {
      if (seen.has(e.address))
        ctx.addIssue({
          code: "custom",
          path: ["endpoints", i, "address"],
          message: `duplicate endpoint ${e.address}`,
        });
      seen.add(e.address);
      if (pool.dpMode === "external" && Array.isArray(e.ranks) && e.ranks.length !== 1)
        ctx.addIssue({
          code: "custom",
          path: ["endpoints", i, "ranks"],
          message: "an external-LB endpoint serves exactly one rank",
        });
      // Also with ranks: auto — the lowest rank /metrics shows is not the start rank when that
      // rank's engine is down or not selected, and every header would be off by the gap.
      if (pool.dpMode === "hybrid" && e.startRank === undefined)
        ctx.addIssue({
          code: "custom",
          path: ["endpoints", i, "startRank"],
          message: "hybrid LB needs startRank (vLLM --data-parallel-start-rank)",
        });
      if (pool.engine === "dynamo" && e.workerId === undefined)
        ctx.addIssue({
          code: "custom",
          path: ["endpoints", i, "workerId"],
          message: "dynamo pools need a workerId per endpoint",
        });
    });
  });

/**
 * An IPv4 or IPv6 network as the filter matches it (filter/assembly/trust.ts): a literal address
 * (no zone, no leading zeros), "/", a prefix length within the family. A malformed entry would
 * match no client, so it is refused here rather than silently trusting nobody.
 */
const cidr = z.string().refine((s) => {
  const slash = s.indexOf("/");
  const bits = s.slice(slash + 1);
  if (slash < 0 || !/^\d{1,3}$/.test(bits)) return false;
  const family = isIP(s.slice(0, slash));
  return family !== 0 && !s.includes("%") && Number(bits) <= (family === 4 ? 32 : 128);
}, "expected a CIDR: an IPv4 or IPv6 address, '/', a prefix length (≤ 32 or ≤ 128)");

const rankHeaderPolicySchema = z.strictObject({
  /** ignore: strip client rank headers (default) · honor: pin when valid · reject: 400 on any client rank header. */
  mode: z.enum(["ignore", "honor", "reject"]).default("ignore"),
  /** With honor: only clients from these CIDRs may pin (empty = any client that passes the secret check). */
  trustedCidrs: z.array(cidr).default([]),
  /** With honor: the client must also send this header with this value. */
  secretHeader: z
    .strictObject({
      name: z.string().min(1).toLowerCase(),
      value: z.string().min(16, "use at least 16 characters"),
    })
    .optional(),
});

/**
 * What a cached chunk is worth by where the slot holds it, as a share of its prefill saving
 * (docs/configuration.md "tierWeights" derives the defaults). A better tier is never worth less
 * than a worse one: the filter counts each chunk at its best tier.
 */
export const DEFAULT_TIER_WEIGHTS = { gpu: 1, cpu: 0.85, storage: 0.45 } as const;
const tierWeight = z.number().min(0).max(1);
const tierWeightsSchema = z
  .strictObject({
    gpu: tierWeight.default(DEFAULT_TIER_WEIGHTS.gpu),
    cpu: tierWeight.default(DEFAULT_TIER_WEIGHTS.cpu),
    storage: tierWeight.default(DEFAULT_TIER_WEIGHTS.storage),
  })
  .superRefine((w, ctx) => {
    if (w.cpu > w.gpu)
      ctx.addIssue({ code: "custom", path: ["cpu"], message: `must not exceed gpu (${w.gpu})` });
    if (w.storage > w.cpu)
      ctx.addIssue({ code: "custom", path: ["storage"], message: `must not exceed cpu (${w.cpu})` });
  });

/**
 * Adapter affinity (docs/configuration.md "LoRA adapters"), in prefill-token equivalents like the
 * rest of the cost: what sending an adapter's request to a slot that must load it costs over a slot
 * that has it loaded, and (fullCost) to a slot whose adapter slots are all taken by other adapters.
 */
const loraRoutingSchema = z
  .strictObject({
    loadCost: z.number().min(0).max(1_000_000).default(1024),
    fullCost: z.number().min(0).max(1_000_000).default(8192),
  })
  .superRefine((l, ctx) => {
    if (l.fullCost < l.loadCost)
      ctx.addIssue({
        code: "custom",
        path: ["fullCost"],
        message: `must not be below loadCost (${l.loadCost})`,
      });
  });

const routingSchema = z.strictObject({
  /** Bytes per prefix chunk (wire-format §3). Changing it re-keys the whole index. */
  chunkSize: z.number().int().min(16).max(65536).default(128),
  /** Dynamo's cost: overlapWeight * uncached prefill blocks + decode blocks (+ in-flight). */
  overlapWeight: z.number().min(0).default(1),
  decodeWeight: z.number().min(0).default(1),
  /** 0.75: measured on the quality bench (docs/operations.md "How a slot is chosen"). */
  inflightWeight: z.number().min(0).default(0.75),
  /** Softmax sampling temperature over normalised costs; 0 = always the cheapest (ties random). */
  temperature: z.number().min(0).max(10).default(0),
  /** Worth of a cached chunk on the GPU, in CPU memory, on storage (0..1, gpu ≥ cpu ≥ storage). */
  tierWeights: tierWeightsSchema.default({ ...DEFAULT_TIER_WEIGHTS }),
  rankHeaderPolicy: rankHeaderPolicySchema.default({ mode: "ignore", trustedCidrs: [] }),
  /** No cache yet or no healthy slot: open = forward without a destination; closed = 503. */
  failMode: z.enum(["open", "closed"]).default("open"),
  /**
   * The request header that carries a priority (critical, standard, sheddable); kvroute's own, never
   * forwarded. Only trusted clients (rankHeaderPolicy's trustedCidrs / secretHeader) may send critical.
   */
  priorityHeader: z
    .string()
    .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/, "expected an HTTP header name")
    .toLowerCase()
    .default("x-kvroute-priority"),
  /**
   * Session affinity (docs/configuration.md "Session affinity"): the request header naming a
   * conversation ("" = off). Its requests stay on the slot the last one went to while that slot is
   * a healthy candidate costing at most sessionMargin (prefill-token equivalents) over the best.
   */
  sessionHeader: z
    .string()
    .regex(/^([A-Za-z0-9!#$%&'*+.^_`|~-]{1,64})?$/, 'expected an HTTP header name or ""')
    .toLowerCase()
    .default("x-session-id"),
  sessionMargin: z.number().min(0).max(1_000_000).default(1024),
  /** How long a session's slot is remembered after its last request. */
  sessionTtlMs: z.number().int().min(1000).max(86_400_000).default(600_000),
  lora: loraRoutingSchema.default(loraRoutingSchema.parse({})),
  /** Pool for requests whose model no pool lists; none → 404. */
  defaultPool: z.string().optional(),
  /**
   * Bodies larger than this are routed by load only. At most the filter's own limit (64 MiB,
   * filter/core/plugin-config.ts MAX_BODY_BYTES: the VM's 1 GiB of memory), since the endpoint
   * picker's embedded filter is configured with it.
   */
  maxBodyBytes: z
    .number()
    .int()
    .min(1024)
    .max(64 * 1024 * 1024)
    .default(4 * 1024 * 1024),
});

const cacheSchema = z.strictObject({
  /** Prefix-index buckets in the gateway's shared data (power of two). */
  buckets: z
    .number()
    .int()
    .min(16)
    .max(1 << 24)
    .refine((n) => (n & (n - 1)) === 0, "must be a power of two")
    .default(65536),
  /** Rows per bucket image (16 bytes each: a chunk's slots on one tier within one 32-slot segment). */
  ways: z.number().int().min(1).max(4096).default(60),
  /**
   * What a bucket with more chunks than rows shows (docs/wire-format.md §4.4): `newest` (the most
   * recently stored chunks, from `ways` chunks on, patched row by row: past ~150 full caches it
   * keeps the prefixes requests reuse, docs/scaling.md) or `shallowest` (the first chunks of
   * prompts; re-encoded whole, so it shows only `fullWays` rows past ways + ways / 4 chunks).
   */
  fullKeep: z.enum(["shallowest", "newest"]).default("newest"),
  /**
   * Rows a full bucket shows, at most `ways`. Default: `ways` when full buckets keep their newest,
   * 8 when they keep their shallowest (a shallowest-first full bucket is re-encoded about twice per
   * shown row and cache lifetime, so fewer rows bound publication where buckets fill).
   */
  fullWays: z.number().int().min(1).max(4096).optional(),
  /** How long a speculative route (written by the filter at routing time) counts. */
  speculativeTtlMs: z.number().int().min(100).max(600_000).default(2000),
  /** KV blocks indexed per slot at most: past it the least recently stored go (bounds memory). */
  maxBlocksPerSlot: z
    .number()
    .int()
    .min(1)
    .max(2 ** 32 - 1)
    .default(1 << 20),
});

const loadSchema = z.strictObject({
  scrapeIntervalMs: z.number().int().min(50).max(60_000).default(250),
  scrapeTimeoutMs: z.number().int().min(50).max(60_000).default(1000),
  /** Consecutive failed scrapes (or reported connection errors) before a slot is unhealthy. */
  unhealthyAfter: z.number().int().min(1).max(100).default(3),
  /** How often every endpoint's /v1/models is read for LoRA adapters (docs/configuration.md). */
  modelsIntervalMs: z.number().int().min(100).max(600_000).default(10_000),
});

const syncSchema = z.strictObject({
  /** How long GET /v1/sync waits for news before answering empty. */
  longPollMs: z.number().int().min(100).max(120_000).default(20_000),
  snapshotPageBytes: z
    .number()
    .int()
    .min(4096)
    .max(64 * 1024 * 1024)
    .default(1024 * 1024),
  /** Versions kept in the delta log; an older client gets a snapshot. */
  deltaLogVersions: z.number().int().min(16).max(10_000_000).default(100_000),
});

/** What one HTTP client may hold of the listener (common/http-limits.ts says why these defaults). */
const httpSchema = z
  .strictObject({
    /** Connections open at once; past it new ones are closed as soon as accepted. */
    maxConnections: z.number().int().min(1).max(1_000_000).default(HTTP_LIMIT_DEFAULTS.maxConnections),
    /** Time a client has to send a request's headers. */
    headersTimeoutMs: z.number().int().min(100).max(600_000).default(HTTP_LIMIT_DEFAULTS.headersTimeoutMs),
    /** Time a client has to send a whole request, body included (not the answer: long polls are unaffected). */
    requestTimeoutMs: z.number().int().min(100).max(3_600_000).default(HTTP_LIMIT_DEFAULTS.requestTimeoutMs),
  })
  // Node refuses a headers timeout longer than the whole request's.
  .refine((h) => h.headersTimeoutMs <= h.requestTimeoutMs, {
    message: "headersTimeoutMs must not exceed requestTimeoutMs",
    path: ["headersTimeoutMs"],
  });

/** A file the process must be able to read (TLS material): checked when the configuration loads. */
const readableFile = z
  .string()
  .min(1)
  .refine((f) => existsSync(f), "file not found");

/**
 * The GAIE endpoint picker (docs/gaie.md): an ext_proc gRPC server run by this process, deciding
 * with the shipped filter embedded. Absent = off.
 */
const eppSchema = z.strictObject({
  /** ext_proc + gRPC health; GAIE pickers listen on 9002. */
  listen: hostPort.default("0.0.0.0:9002"),
  /** A second, health-only listener (GAIE's charts probe 9003); unset = health on `listen` only. */
  healthListen: hostPort.optional(),
  /** Serve TLS with this certificate chain and key (PEM files); unset = plaintext. */
  tls: z.strictObject({ certFile: readableFile, keyFile: readableFile }).optional(),
  /** Body modes assumed when the gateway does not send protocol_config (GAIE gateways: FULL_DUPLEX_STREAMED). */
  requestBodyMode: z.enum(["FULL_DUPLEX_STREAMED", "BUFFERED"]).default("FULL_DUPLEX_STREAMED"),
  responseBodyMode: z
    .enum(["FULL_DUPLEX_STREAMED", "BUFFERED", "STREAMED", "NONE"])
    .default("FULL_DUPLEX_STREAMED"),
  /**
   * Fallback endpoints after the best one in the destination (GAIE's ordered list, walked by
   * the gateway's retries): the next best endpoints of the pool that take the same rank headers.
   */
  destinationFallbacks: z.number().int().min(0).max(7).default(3),
  /**
   * How a gateway's subset hint (`x-gateway-destination-endpoint-subset`) selects endpoints: "ip"
   * = every endpoint of a listed pod IP, the port ignored (llm-d-router); "address" = exactly the
   * listed ip:port entries.
   */
  subsetMatch: z.enum(["ip", "address"]).default("ip"),
  /** The embedded filter's `seed`: 0 = its own per thread; non-zero = reproducible picks. */
  seed: z.number().int().min(0).max(0xffffffff).default(0),
  /**
   * The request header naming a GAIE InferenceObjective; unset = llm-d-router's
   * x-llm-d-inference-objective, then the deprecated x-gateway-inference-objective.
   */
  objectiveHeader: z
    .string()
    .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/, "expected an HTTP header name")
    .toLowerCase()
    .optional(),
  /**
   * InferenceObjectives and their priority (GAIE: higher is more important, negative may be shed
   * first): < 0 → sheddable, 0 → standard, > 0 → critical (docs/gaie.md "Priority"). Listed here;
   * the picker does not watch InferenceObjective resources.
   */
  objectives: z
    .array(z.strictObject({ name: z.string().min(1).max(253), priority: z.number().int() }))
    .default([])
    .refine((os) => new Set(os.map((o) => o.name)).size === os.length, "objective names must be unique"),
  /**
   * Watch the InferenceObjective and InferenceModelRewrite resources of this namespace whose
   * poolRef names `inferencePool` (llm-d-router's CRDs, llm-d.ai/v1alpha2); unset = not watched.
   */
  resources: z
    .strictObject({
      namespace: z.string().min(1).max(63),
      inferencePool: z.string().min(1).max(253),
      /** The InferencePool's API group, as the poolRef names it. */
      poolGroup: z.string().min(1).default("inference.networking.k8s.io"),
      group: z.string().min(1).default("llm-d.ai"),
      version: z.string().min(1).default("v1alpha2"),
    })
    .optional(),
});

/**
 * Replicas share what gateways report over NATS core pub/sub (control-plane/src/replicas/,
 * docs/operations.md "Control-plane replicas"). Absent = this replica keeps its own view only.
 */
const natsSchema = z.strictObject({
  /** NATS servers, `nats://host:port` (or `host:port`); the client picks one and fails over. */
  servers: z
    .array(z.string().regex(/^(nats|tls):\/\/[^\s/]+$|^[^\s/:]+:\d{1,5}$/, "expected nats://host:port"))
    .min(1),
  /** Subjects are `<prefix>.reports`, `<prefix>.slots` (and `<prefix>.kv` with shardPools): one prefix per kvroute deployment. */
  subjectPrefix: z
    .string()
    .regex(
      /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/,
      "expected NATS subject tokens (letters, digits, - _) joined by .",
    )
    .default("kvroute"),
  /** This replica's name on the bus; unset = `<hostname>-<pid>` (the pod name in Kubernetes). */
  replicaId: z.string().min(1).max(128).optional(),
  /** A NATS `.creds` file (JWT + NKey seed) to authenticate with; unset = no credentials. */
  credentialsFile: readableFile.optional(),
  /** How often this replica re-announces its slot table (and that it is alive). */
  announceIntervalMs: z.number().int().min(100).max(60_000).default(2000),
  /**
   * Shard pools over the replicas (docs/operations.md "Sharding pools"): each pool's KV events are
   * ingested by one owner, chosen from the replicas heard on NATS, and relayed to the others on
   * `<prefix>.kv`. Off: every replica subscribes to every engine itself.
   */
  shardPools: z.boolean().default(false),
});

/**
 * What kvroute traces once OpenTelemetry is on (the standard OTEL_* environment variables turn it
 * on and say where spans go: docs/operations.md "Tracing").
 */
const tracingSchema = z.strictObject({
  /** Share of KV-event batches traced (0–1): engines publish one per step per rank. */
  kvEventBatchRatio: z.number().min(0).max(1).default(0.01),
});

/** Headers the filter owns or reads as rank headers (filter/assembly/stream.ts): no priority header. */
const ROUTING_HEADER_NAMES = new Set([
  "x-gateway-destination-endpoint",
  "x-dynamo-worker-instance-id",
  "x-worker-instance-id",
  "x-dynamo-prefill-instance-id",
  "x-prefill-instance-id",
  "x-dynamo-routing-mode",
  "x-data-parallel-rank",
  "x-dynamo-dp-rank",
  "x-dp-rank",
  "x-dynamo-prefill-dp-rank",
  "x-prefill-dp-rank",
]);

export const configSchema = z
  .strictObject({
    /** One port for sync, reports, status, dashboard, /metrics, /healthz, /readyz. */
    listen: hostPort.default("0.0.0.0:9090"),
    /**
     * Bearer token the filter sends on sync and report; env KVROUTE_AUTH_TOKEN overrides. An
     * RFC 6750 b64token, so it travels in the Authorization header unchanged and is compared
     * exactly (no whitespace, no non-ASCII byte that a header would mangle).
     */
    authToken: z
      .string()
      .min(16, "use at least 16 characters")
      .regex(/^[A-Za-z0-9\-._~+/]+=*$/, "use only A-Z a-z 0-9 - . _ ~ + / (then optional = padding)")
      .optional(),
    logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace"]).default("info"),
    pools: z.array(poolSchema).min(1),
    routing: routingSchema.default(routingSchema.parse({})),
    cache: cacheSchema.default(cacheSchema.parse({})),
    load: loadSchema.default(loadSchema.parse({})),
    sync: syncSchema.default(syncSchema.parse({})),
    http: httpSchema.default(httpSchema.parse({})),
    epp: eppSchema.optional(),
    nats: natsSchema.optional(),
    tracing: tracingSchema.default(tracingSchema.parse({})),
  })
  .superRefine((cfg, ctx) => {
    const names = new Set<string>();
    const models = new Map<string, string>();
    cfg.pools.forEach((p, i) => {
      if (names.has(p.name))
        ctx.addIssue({ code: "custom", path: ["pools", i, "name"], message: `duplicate pool ${p.name}` });
      names.add(p.name);
      p.models.forEach((m, j) => {
        const other = models.get(m);
        if (other !== undefined)
          ctx.addIssue({
            code: "custom",
            path: ["pools", i, "models", j],
            message: `model ${m} is already served by pool ${other}`,
          });
        models.set(m, p.name);
      });
    });
    // Adapters share the request's `model` namespace with the base models: one name, one meaning.
    cfg.pools.forEach((p, i) => {
      p.adapters.forEach((a, j) => {
        const other = models.get(a);
        if (other !== undefined)
          ctx.addIssue({
            code: "custom",
            path: ["pools", i, "adapters", j],
            message: `${a} is already a model or adapter of pool ${other}`,
          });
        models.set(a, p.name);
      });
    });
    const priority = cfg.routing.priorityHeader;
    if (priority === cfg.routing.rankHeaderPolicy.secretHeader?.name || ROUTING_HEADER_NAMES.has(priority))
      ctx.addIssue({
        code: "custom",
        path: ["routing", "priorityHeader"],
        message: `${priority} already has a meaning to kvroute; choose another header name`,
      });
    const session = cfg.routing.sessionHeader;
    if (
      session.length > 0 &&
      (session === priority ||
        session === cfg.routing.rankHeaderPolicy.secretHeader?.name ||
        ROUTING_HEADER_NAMES.has(session))
    )
      ctx.addIssue({
        code: "custom",
        path: ["routing", "sessionHeader"],
        message: `${session} already has a meaning to kvroute; choose another header name`,
      });
    if (cfg.routing.defaultPool !== undefined && !names.has(cfg.routing.defaultPool))
      ctx.addIssue({
        code: "custom",
        path: ["routing", "defaultPool"],
        message: `no pool named ${cfg.routing.defaultPool}`,
      });
  });

export type Config = z.infer<typeof configSchema>;
export type PoolConfig = Config["pools"][number];
export type EndpointConfig = PoolConfig["endpoints"][number];
export type EppConfig = NonNullable<Config["epp"]>;
export type NatsConfig = NonNullable<Config["nats"]>;
