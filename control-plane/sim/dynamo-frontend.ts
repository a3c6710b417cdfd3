// A Dynamo frontend in direct routing mode over simulated workers. Each worker (an instance
// id, a role, and its own DP ranks) runs the same engines as the vLLM simulator. Routing
// follows Dynamo's header overrides (lib/llm protocols: `apply_header_routing_overrides`):
// - decode/aggregated worker: `x-dynamo-worker-instance-id`, else alias `x-worker-instance-id`;
// - its DP rank: `x-dynamo-dp-rank`, else `x-dp-rank`, else `x-data-parallel-rank`;
// - prefill worker: `x-dynamo-prefill-instance-id`, else `x-prefill-instance-id`;
// - prefill DP rank: `x-dynamo-prefill-dp-rank`, else `x-prefill-dp-rank`; 4294967295 = unset;
// - the first header present wins even when it does not parse (Rust `get().or_else()`), and
//   values parse as Rust `u64`/`u32` (`str::parse`: ASCII digits, an optional `+`);
// - `x-dynamo-routing-mode` (`aggregated` | `disaggregated`) is recorded and checked;
// - `x-tenant-id` becomes the request's `cache_salt`.
// Without a worker id, a direct-mode frontend cannot dispatch and answers an error.
// Everything received is recorded: `x-kvroute-sim-dynamo-routing` on the response and
// `GET /kvroute/sim/received` (DELETE clears).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  headerValue,
  type PreparedRequest,
  prepareRequest,
  readBody,
  runOnEngine,
  sendError,
} from "./http-front.ts";
import type { EventEncoding } from "./kv-events.ts";
import type { KvEventsConfig } from "./kv-events-config.ts";
import type { ReplayForm } from "./kv-publisher.ts";
import { METRICS_CONTENT_TYPE, renderMetrics } from "./metrics.ts";
import { type Endpoint, OpenAIError } from "./openai.ts";
import type { RealtimeEngine } from "./realtime.ts";
import { closeRanks, type EngineSettings, type RankRuntime, startRanks } from "./server.ts";
import { SimTokenizer } from "./tokenize.ts";

export type WorkerRole = "aggregated" | "prefill" | "decode";

export interface DynamoWorkerSpec {
  /** Decimal u64 instance id. */
  instanceId: string;
  role: WorkerRole;
}

export interface DynamoConfig extends EngineSettings {
  model: string;
  host: string;
  port: number;
  tokenizerDir: string;
  timeScale: number;
  dataParallelSize: number;
  workers: DynamoWorkerSpec[];
  kvEvents: KvEventsConfig | null;
  eventEncoding: EventEncoding;
  replayForm: ReplayForm;
  promptTokensDetails: boolean;
}

export const DYNAMO_HEADERS = {
  worker: ["x-dynamo-worker-instance-id", "x-worker-instance-id"],
  dpRank: ["x-dynamo-dp-rank", "x-dp-rank", "x-data-parallel-rank"],
  prefillWorker: ["x-dynamo-prefill-instance-id", "x-prefill-instance-id"],
  prefillDpRank: ["x-dynamo-prefill-dp-rank", "x-prefill-dp-rank"],
  routingMode: ["x-dynamo-routing-mode"],
  tenant: ["x-tenant-id"],
} as const;

const UNSET_DP_RANK = 4294967295n;
export const DIRECT_MODE_ERROR = "Worker ID required for exact dispatch in Direct routing mode";

/** Rust's `str::parse::<uN>()`: optional '+', then ASCII digits only, within range. */
export function parseRustUint(s: string, bits: 32 | 64): bigint | null {
  if (!/^\+?[0-9]+$/.test(s)) return null;
  const v = BigInt(s);
  return v < 1n << BigInt(bits) ? v : null;
}

function firstHeader(req: IncomingMessage, names: readonly string[]): string | undefined {
  for (const n of names) {
    const v = headerValue(req, n);
    if (v !== undefined) return v;
  }
  return undefined;
}

export interface RoutingDecision {
  mode: "aggregated" | "disaggregated";
  workerId: string;
  dpRank: number;
  prefillWorkerId: string | null;
  prefillDpRank: number | null;
}

export interface ReceivedRecord {
  path: string;
  headers: Record<string, string>;
  decision: RoutingDecision | null;
  error: string | null;
}

interface Worker {
  spec: DynamoWorkerSpec;
  ranks: RankRuntime[];
  next: number;
}

export class DynamoFront {
  readonly server: Server;
  private readonly received: ReceivedRecord[] = [];
  private readonly byId = new Map<string, Worker>();

  constructor(
    private readonly cfg: DynamoConfig,
    private readonly tokenizer: SimTokenizer,
    workers: Array<{ spec: DynamoWorkerSpec; ranks: RankRuntime[] }>,
  ) {
    for (const w of workers) this.byId.set(w.spec.instanceId, { ...w, next: 0 });
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        sendError(
          res,
          err instanceof OpenAIError ? err : new OpenAIError(500, String(err), "InternalServerError"),
        );
      });
    });
  }

  receivedLog(): ReceivedRecord[] {
    return this.received.slice();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://sim");
    switch (`${req.method} ${url.pathname}`) {
      case "GET /health":
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ status: "healthy" }));
        return;
      case "GET /v1/models":
        res.writeHead(200, { "content-type": "application/json" }).end(
          JSON.stringify({
            object: "list",
            data: [
              {
                id: this.cfg.model,
                object: "model",
                created: Math.floor(Date.now() / 1000),
                owned_by: "nvidia",
              },
            ],
          }),
        );
        return;
      case "GET /kvroute/sim/received":
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(this.received));
        return;
      case "DELETE /kvroute/sim/received":
        this.received.length = 0;
        res.writeHead(204).end();
        return;
      case "GET /kvroute/sim/workers":
        res.writeHead(200, { "content-type": "application/json" }).end(
          JSON.stringify(
            [...this.byId.values()].map((w) => ({
              instance_id: w.spec.instanceId,
              role: w.spec.role,
              dp_size: w.ranks.length,
            })),
          ),
        );
        return;
      case "POST /v1/completions":
        return this.generate("completion", req, res, url.pathname);
      case "GET /metrics":
        // A Dynamo frontend has its own metrics; here every worker's engines are exposed the way
        // each vLLM worker process would expose them, with a `worker_id` label to tell them apart.
        {
          const all = [...this.byId.values()].flatMap((w) => w.ranks.map((r) => ({ w, e: r.rt.engine })));
          res.writeHead(200, { "content-type": METRICS_CONTENT_TYPE }).end(
            renderMetrics(
              this.cfg.model,
              all.map((x) => x.e),
              (k) => [["worker_id", (all[k] as { w: Worker }).w.spec.instanceId]],
            ),
          );
        }
        return;
      case "POST /v1/chat/completions":
        return this.generate("chat", req, res, url.pathname);
      default:
        res.writeHead(404).end();
    }
  }

  private record(
    path: string,
    req: IncomingMessage,
    decision: RoutingDecision | null,
    error: string | null,
  ): void {
    const headers: Record<string, string> = {};
    for (const names of Object.values(DYNAMO_HEADERS)) {
      for (const n of names) {
        const v = headerValue(req, n);
        if (v !== undefined) headers[n] = v;
      }
    }
    this.received.push({ path, headers, decision, error });
    if (this.received.length > 10_000) this.received.shift();
  }

  /** Applies Dynamo's header rules; throws OpenAIError when the request cannot be dispatched. */
  decide(req: IncomingMessage): RoutingDecision {
    const fail = (msg: string): never => {
      throw new OpenAIError(500, msg, "Internal Server Error");
    };
    const workerRaw = firstHeader(req, DYNAMO_HEADERS.worker);
    const workerId = workerRaw === undefined ? null : parseRustUint(workerRaw, 64);
    if (workerId === null) fail(DIRECT_MODE_ERROR);
    const worker = this.byId.get(String(workerId));
    if (!worker) return fail(`worker instance ${workerId} not found`);
    if (worker.spec.role === "prefill")
      fail(`worker instance ${workerId} is a prefill worker; it cannot decode`);
    const dpRaw = firstHeader(req, DYNAMO_HEADERS.dpRank);
    const dp = dpRaw === undefined ? null : parseRustUint(dpRaw, 32);
    const dpRank = dp === null ? this.pickRank(worker) : Number(dp);
    if (dpRank >= worker.ranks.length)
      fail(`dp_rank ${dpRank} out of range for worker ${workerId} (dp size ${worker.ranks.length})`);

    const pRaw = firstHeader(req, DYNAMO_HEADERS.prefillWorker);
    const prefillId = pRaw === undefined ? null : parseRustUint(pRaw, 64);
    const modeHeader = firstHeader(req, DYNAMO_HEADERS.routingMode);
    if (modeHeader !== undefined && modeHeader !== "aggregated" && modeHeader !== "disaggregated") {
      fail(`invalid x-dynamo-routing-mode: ${modeHeader}`);
    }
    const disagg = prefillId !== null || worker.spec.role === "decode" || modeHeader === "disaggregated";
    if (!disagg)
      return {
        mode: "aggregated",
        workerId: String(workerId),
        dpRank,
        prefillWorkerId: null,
        prefillDpRank: null,
      };
    if (prefillId === null)
      return fail(`prefill worker ID required for disaggregated serving in Direct routing mode`);
    const prefill = this.byId.get(String(prefillId));
    if (!prefill) return fail(`prefill worker instance ${prefillId} not found`);
    if (prefill.spec.role === "decode")
      fail(`worker instance ${prefillId} is a decode worker; it cannot prefill`);
    const pdRaw = firstHeader(req, DYNAMO_HEADERS.prefillDpRank);
    let pd = pdRaw === undefined ? null : parseRustUint(pdRaw, 32);
    if (pd === UNSET_DP_RANK) pd = null;
    const prefillDpRank = pd === null ? this.pickRank(prefill) : Number(pd);
    if (prefillDpRank >= prefill.ranks.length) {
      fail(
        `prefill dp_rank ${prefillDpRank} out of range for worker ${prefillId} (dp size ${prefill.ranks.length})`,
      );
    }
    return {
      mode: "disaggregated",
      workerId: String(workerId),
      dpRank,
      prefillWorkerId: String(prefillId),
      prefillDpRank,
    };
  }

  /** A worker's own engine choice when no rank is given: least loaded, then round robin. */
  private pickRank(w: Worker): number {
    let best = -1;
    let bestLoad = Number.POSITIVE_INFINITY;
    for (let i = 0; i < w.ranks.length; i++) {
      const idx = (w.next + i) % w.ranks.length;
      const l = (w.ranks[idx] as RankRuntime).rt.engine.load();
      const load = l.waiting * 4 + l.running;
      if (load < bestLoad) {
        bestLoad = load;
        best = idx;
      }
    }
    w.next = (w.next + 1) % w.ranks.length;
    return best;
  }

  private async generate(
    endpoint: Endpoint,
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
  ): Promise<void> {
    const raw = await readBody(req, 64 * 1024 * 1024);
    let decision: RoutingDecision;
    let prepared: PreparedRequest;
    try {
      decision = this.decide(req);
      prepared = prepareRequest(endpoint, raw, {
        model: this.cfg.model,
        loraNames: [],
        tokenizer: this.tokenizer,
        maxModelLen: this.cfg.maxModelLen,
      });
    } catch (err) {
      if (!(err instanceof OpenAIError)) throw err;
      this.record(path, req, null, err.message);
      sendError(res, err);
      return;
    }
    this.record(path, req, decision, null);
    // Dynamo maps a non-empty `x-tenant-id` onto the request's cache salt (header over body).
    const tenant = headerValue(req, "x-tenant-id");
    if (tenant) prepared.parsed.cacheSalt = tenant;
    const headers: Record<string, string> = {
      "x-kvroute-sim-dynamo-routing": JSON.stringify(decision),
      "x-kvroute-sim-worker": decision.workerId,
    };
    const decodeRt = this.engineOf(decision.workerId, decision.dpRank);
    const opts = { promptTokensDetails: this.cfg.promptTokensDetails, tokenizer: this.tokenizer };
    if (decision.mode === "aggregated") {
      runOnEngine(res, prepared, decodeRt, opts, { headers });
      return;
    }
    // Disaggregated: the prefill worker computes the prompt (one token out), then the decode
    // worker receives the KV (not recomputed there) and generates.
    const prefillRt = this.engineOf(decision.prefillWorkerId as string, decision.prefillDpRank as number);
    headers["x-kvroute-sim-prefill-worker"] = decision.prefillWorkerId as string;
    headers["x-kvroute-sim-prefill-rank"] = String(prefillRt.engine.rank);
    let prefillReq: ReturnType<RealtimeEngine["submit"]>;
    try {
      prefillReq = prefillRt.submit(
        {
          id: `prefill-${Date.now()}`,
          promptTokens: prepared.promptTokens,
          maxTokens: 1,
          cacheSalt: prepared.parsed.cacheSalt,
        },
        {
          onToken: (out) => {
            if (!out.finished) return;
            headers["x-kvroute-sim-prefill-cached-tokens"] = String(Math.max(0, prefillReq.cachedTokens));
            if (!res.destroyed)
              runOnEngine(res, prepared, decodeRt, { ...opts, prefilledRemotely: true }, { headers });
          },
        },
      );
    } catch (err) {
      sendError(res, new OpenAIError(400, (err as Error).message));
      return;
    }
    res.on("close", () => prefillRt.abort(prefillReq));
  }

  private engineOf(workerId: string, dpRank: number): RealtimeEngine {
    return ((this.byId.get(workerId) as Worker).ranks[dpRank] as RankRuntime).rt;
  }
}

export interface RunningDynamo {
  port: number;
  front: DynamoFront;
  workers: Array<{ spec: DynamoWorkerSpec; ranks: RankRuntime[] }>;
  close(): Promise<void>;
}

export async function startDynamo(cfg: DynamoConfig): Promise<RunningDynamo> {
  if (cfg.workers.length === 0) throw new Error("the Dynamo frontend needs at least one worker");
  const ids = new Set<string>();
  for (const w of cfg.workers) {
    if (parseRustUint(w.instanceId, 64) === null)
      throw new Error(`worker instance id ${w.instanceId} is not a u64`);
    if (ids.has(w.instanceId)) throw new Error(`duplicate worker instance id ${w.instanceId}`);
    ids.add(w.instanceId);
  }
  const tokenizer = SimTokenizer.load(cfg.tokenizerDir);
  const workers: Array<{ spec: DynamoWorkerSpec; ranks: RankRuntime[] }> = [];
  try {
    for (const [i, spec] of cfg.workers.entries()) {
      const ranks = Array.from({ length: cfg.dataParallelSize }, (_, r) => r);
      // Each worker's rank r publishes on port + (worker index × DP size) + r.
      workers.push({
        spec,
        ranks: await startRanks(ranks, cfg, tokenizer.outputVocab, (r) => i * cfg.dataParallelSize + r),
      });
    }
  } catch (err) {
    for (const w of workers) await closeRanks(w.ranks);
    throw err;
  }
  const front = new DynamoFront(cfg, tokenizer, workers);
  try {
    await new Promise<void>((resolve, reject) => {
      front.server.once("error", (err: NodeJS.ErrnoException) =>
        reject(
          err.code === "EADDRINUSE" ? new Error(`port ${cfg.port} on ${cfg.host} is already in use`) : err,
        ),
      );
      front.server.listen(cfg.port, cfg.host, resolve);
    });
  } catch (err) {
    for (const w of workers) await closeRanks(w.ranks);
    throw err;
  }
  return {
    port: (front.server.address() as AddressInfo).port,
    front,
    workers,
    async close() {
      front.server.closeAllConnections();
      await new Promise<void>((resolve) => front.server.close(() => resolve()));
      for (const w of workers) await closeRanks(w.ranks);
    },
  };
}
