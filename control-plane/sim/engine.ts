// One simulated engine (one DP rank): a vLLM-V1-like scheduler over a paged prefix cache.
// Pure and clock-free: a driver calls `schedule()` to start a step (which returns its modelled
// duration) and `complete()` when that time has passed. The real-time server and the
// virtual-time cluster drive the same code, so both see identical cache and queue behaviour.
//
// Scheduling per step, as vLLM does with chunked prefill:
// 1. running requests first, in order: each gets its remaining prompt chunk or one decode
//    token within the token budget (`maxNumBatchedTokens`); when blocks run out, the last
//    running request is preempted (its blocks freed, back to the front of the queue, recomputed
//    later — its cached blocks usually survive as cache hits);
// 2. then waiting requests, FIFO, while fewer than `maxNumSeqs` run and budget remains: the
//    longest cached prefix is taken (capped at prompt − 1 tokens, as vLLM must compute at least
//    the last token), blocks for the chunk are allocated, or the queue stops there.
// At the end of a step, newly full computed blocks are cached (BlockStored per contiguous run,
// with the parent hash), and every request whose known tokens are all computed samples a token.
// With a CPU offload tier (`numCpuBlocks`), blocks the GPU evicts are kept there (cpu-tier.ts);
// an admitted request's prefix continues from the GPU hit into the tier, and those blocks are
// loaded (charged per token, latency.ts) instead of computed, then cached on the GPU again.
// With LoRA (`lora`), as vLLM V1's scheduler: a step batches requests of at most `maxLoras`
// adapters; a waiting request of another adapter is skipped (it stays queued, later ones may go
// first); a step that uses an adapter not in GPU memory (an LRU of maxLoras) loads it first,
// `loadMs` per adapter.
import { type BlockHash, BlockHasher, blockExtraKeys } from "./block-hash.ts";
import { BlockPool } from "./block-pool.ts";
import { CpuTier } from "./cpu-tier.ts";
import type { KvEvent } from "./kv-events.ts";
import {
  chunkAttentionPairs,
  DEFAULT_LATENCY,
  type LatencyModel,
  type StepWork,
  stepDurationMs,
} from "./latency.ts";
import { mixSeed, Rng } from "./rng.ts";

export interface EngineConfig {
  rank: number;
  blockSize: number;
  numGpuBlocks: number;
  /** Blocks of the CPU offload tier; 0 or absent: no tier. */
  numCpuBlocks?: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  /** Longest prompt + output accepted; defaults to the whole cache. */
  maxModelLen?: number;
  latency?: LatencyModel;
  seed: number;
  /** Token ids the simulated model samples from (ordinary words of the vocabulary). */
  outputVocab: readonly number[];
  /** Hash of the (virtual) block before the first block, vLLM's NONE_HASH. */
  hashRoot: BlockHash;
  /** LoRA serving (vLLM --enable-lora); absent or null: adapters are not limited or loaded. */
  lora?: LoraSettings | null;
}

export interface LoraSettings {
  /** Adapters in one batch and in GPU memory (vLLM --max-loras). */
  maxLoras: number;
  /** Time to load an adapter into GPU memory, charged to the step that first uses it. */
  loadMs: number;
}

/** What vllm:lora_requests_info shows: adapters with running and with waiting requests. */
export interface LoraInfo {
  maxLoras: number;
  running: string[];
  waiting: string[];
}

export interface EngineRequestSpec {
  id: string;
  promptTokens: readonly number[];
  maxTokens: number;
  loraName?: string | null;
  /** vLLM's integer adapter id (published as the deprecated `lora_id`). */
  loraId?: number | null;
  cacheSalt?: string | null;
  /** Disaggregated decode: the prompt's KV arrives from a prefill worker, so the prompt is
   * not computed here (only blocks are allocated), as with vLLM's KV-transfer connectors. */
  prefilledRemotely?: boolean;
  /** Hashes of the prompt's full blocks if the caller already computed them (same root,
   * block size and extra keys), so a router probing the caches and the engine share the work. */
  promptBlockHashes?: readonly BlockHash[];
}

export type RequestStatus = "waiting" | "running" | "finished";

export class EngineRequest {
  readonly tokens: number[];
  readonly numPromptTokens: number;
  numComputed = 0;
  blocks: number[] = [];
  /** Index of the next full block to register in the cache. */
  nextBlockToCache = 0;
  /** Prompt tokens found in the prefix cache (GPU, then CPU tier) at first scheduling; -1 before. */
  cachedTokens = -1;
  /** Of those, tokens loaded from the CPU tier at admission (charged in the admitting step). */
  loadedTokens = 0;
  outputTokens = 0;
  status: RequestStatus = "waiting";
  firstTokenMs = -1;
  finishMs = -1;
  preemptions = 0;
  readonly hasher: BlockHasher;
  readonly rng: Rng;

  constructor(
    readonly spec: EngineRequestSpec,
    readonly arrivalMs: number,
    blockSize: number,
    hashRoot: BlockHash,
    seed: number,
  ) {
    this.tokens = Array.from(spec.promptTokens);
    this.numPromptTokens = this.tokens.length;
    this.hasher = new BlockHasher(blockSize, hashRoot, {
      loraName: spec.loraName,
      cacheSalt: spec.cacheSalt,
    });
    if (spec.promptBlockHashes) this.hasher.hashes.push(...spec.promptBlockHashes);
    // The generated text depends only on the seed and the prompt, not on arrival order.
    let h = 0x811c9dc5;
    for (const t of this.tokens) h = Math.imul(h ^ t, 0x01000193) >>> 0;
    this.rng = new Rng(mixSeed(seed, h, this.tokens.length));
  }
}

export interface TokenOutput {
  request: EngineRequest;
  token: number;
  first: boolean;
  finished: boolean;
}

export interface ScheduledStep extends StepWork {
  durationMs: number;
  entries: Array<{ request: EngineRequest; numNew: number }>;
}

export interface StepResult {
  outputs: TokenOutput[];
  events: KvEvent[];
}

export interface EngineLoad {
  rank: number;
  waiting: number;
  running: number;
  kvUsage: number;
  numFreeBlocks: number;
  numCachedBlocks: number;
  /** Adapters of running and waiting requests (null or absent without LoRA). */
  lora?: LoraInfo | null;
}

export interface EngineCounters {
  prefixCacheQueries: number;
  prefixCacheHits: number;
  promptTokens: number;
  generationTokens: number;
  requestsFinished: number;
  preemptions: number;
}

export class RequestRejected extends Error {}

export class Engine {
  readonly pool: BlockPool;
  readonly waiting: EngineRequest[] = [];
  running: EngineRequest[] = [];
  readonly counters: EngineCounters = {
    prefixCacheQueries: 0,
    prefixCacheHits: 0,
    promptTokens: 0,
    generationTokens: 0,
    requestsFinished: 0,
    preemptions: 0,
  };
  private readonly latency: LatencyModel;
  readonly maxModelLen: number;
  busy = false;
  /** Adapters in GPU memory, least recently used first (LoRA only). */
  readonly loadedAdapters: string[] = [];
  /** Adapter loads so far (LoRA only). */
  adapterLoads = 0;

  constructor(readonly config: EngineConfig) {
    const cpuBlocks = config.numCpuBlocks ?? 0;
    this.pool = new BlockPool(
      config.numGpuBlocks,
      cpuBlocks > 0 ? new CpuTier(cpuBlocks, config.blockSize) : null,
    );
    this.latency = config.latency ?? DEFAULT_LATENCY;
    this.maxModelLen = config.maxModelLen ?? config.numGpuBlocks * config.blockSize;
    if (config.outputVocab.length === 0) throw new RangeError("outputVocab must not be empty");
  }

  get rank(): number {
    return this.config.rank;
  }

  load(): EngineLoad {
    return {
      rank: this.config.rank,
      waiting: this.waiting.length,
      running: this.running.length,
      kvUsage: this.pool.usage,
      numFreeBlocks: this.pool.numFreeBlocks,
      numCachedBlocks: this.pool.numCachedBlocks,
      lora: this.loraInfo(),
    };
  }

  /** The adapters of running and of waiting requests (null without LoRA), as vLLM's gauge. */
  loraInfo(): LoraInfo | null {
    const lora = this.config.lora;
    if (lora == null) return null;
    const names = (rs: readonly EngineRequest[]) => [
      ...new Set(rs.map((r) => r.spec.loraName).filter((n): n is string => n != null)),
    ];
    return { maxLoras: lora.maxLoras, running: names(this.running), waiting: names(this.waiting) };
  }

  hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0;
  }

  /** Queues a request; throws RequestRejected when it can never fit. */
  add(spec: EngineRequestSpec, nowMs: number): EngineRequest {
    const total = spec.promptTokens.length + spec.maxTokens;
    if (spec.promptTokens.length === 0)
      throw new RequestRejected("The prompt must contain at least one token.");
    if (total > this.maxModelLen) {
      throw new RequestRejected(
        `This model's maximum context length is ${this.maxModelLen} tokens. However, you requested ` +
          `${spec.maxTokens} output tokens and your prompt contains ${spec.promptTokens.length} input tokens, ` +
          `for a total of ${total} tokens. Please reduce the length of the input prompt or the number of ` +
          "requested output tokens.",
      );
    }
    const req = new EngineRequest(spec, nowMs, this.config.blockSize, this.config.hashRoot, this.config.seed);
    this.waiting.push(req);
    return req;
  }

  /** Plans the next step; null when there is nothing to run. */
  schedule(): ScheduledStep | null {
    const bs = this.config.blockSize;
    let budget = this.config.maxNumBatchedTokens;
    const entries: ScheduledStep["entries"] = [];
    let preempted = false;

    for (let i = 0; i < this.running.length && budget > 0; i++) {
      const req = this.running[i] as EngineRequest;
      const numNew = Math.min(req.tokens.length - req.numComputed, budget);
      if (numNew <= 0) continue;
      const need = Math.ceil((req.numComputed + numNew) / bs) - req.blocks.length;
      let self = false;
      while (need > this.pool.numFreeBlocks) {
        const victim = this.running[this.running.length - 1] as EngineRequest;
        this.preempt(victim);
        preempted = true;
        if (victim === req) {
          self = true;
          break;
        }
      }
      if (self) break;
      if (need > 0) req.blocks.push(...(this.pool.allocate(need) as number[]));
      entries.push({ request: req, numNew });
      budget -= numNew;
    }

    // Adapters this step batches: the running requests' first (vLLM's scheduled_loras).
    const lora = this.config.lora ?? null;
    const stepAdapters = new Set<string>();
    if (lora !== null)
      for (const e of entries) if (e.request.spec.loraName != null) stepAdapters.add(e.request.spec.loraName);
    // vLLM admits no new requests in a step that had to preempt.
    let w = 0;
    while (
      !preempted &&
      w < this.waiting.length &&
      this.running.length < this.config.maxNumSeqs &&
      budget > 0
    ) {
      const req = this.waiting[w] as EngineRequest;
      const adapter = req.spec.loraName ?? null;
      if (
        lora !== null &&
        adapter !== null &&
        !stepAdapters.has(adapter) &&
        stepAdapters.size >= lora.maxLoras
      ) {
        w++; // another adapter's turn: skipped, still first in line for a later step
        continue;
      }
      req.hasher.update(req.tokens, req.tokens.length);
      const maxHit = Math.floor((req.tokens.length - 1) / bs);
      const hit = this.pool.longestCachedPrefix(req.hasher.hashes, maxHit);
      const loaded = this.cpuHit(req.hasher.hashes, hit, maxHit);
      const remote = req.spec.prefilledRemotely === true && req.outputTokens === 0;
      const computed = remote ? req.tokens.length - 1 : (hit + loaded) * bs;
      const numNew = Math.min(req.tokens.length - computed, budget);
      const need = Math.ceil((computed + numNew) / bs) - hit;
      if (need > this.pool.numFreeBlocks - this.pool.freeAmongCached(req.hasher.hashes, hit)) break;
      this.waiting.splice(w, 1);
      if (adapter !== null) stepAdapters.add(adapter);
      // Touched first, so the GPU evictions this admission causes cannot push them out.
      for (let b = hit; b < hit + loaded; b++) this.pool.cpu?.touch(req.hasher.hashes[b] as BlockHash);
      req.blocks = this.pool.touch(req.hasher.hashes, hit);
      req.blocks.push(...(this.pool.allocate(need) as number[]));
      req.numComputed = computed;
      // Loaded blocks are cached on the GPU again when the step ends, like computed ones.
      req.nextBlockToCache = hit;
      req.loadedTokens = remote ? 0 : loaded * bs;
      this.counters.prefixCacheQueries += req.tokens.length;
      this.counters.prefixCacheHits += hit * bs;
      if (req.cachedTokens < 0) req.cachedTokens = Math.min((hit + loaded) * bs, req.numPromptTokens);
      req.status = "running";
      this.running.push(req);
      entries.push({ request: req, numNew });
      budget -= numNew;
    }

    if (entries.length === 0) return null;
    const work: StepWork = {
      prefillTokens: 0,
      decodeSeqs: 0,
      decodeContextTokens: 0,
      prefillAttentionPairs: 0,
      loadedTokens: 0,
    };
    for (const e of entries) {
      // Admitted this step with a prefix in the CPU tier: its blocks come over PCIe.
      if (e.request.loadedTokens > 0) {
        work.loadedTokens = (work.loadedTokens ?? 0) + e.request.loadedTokens;
        e.request.loadedTokens = 0;
      }
      // A request still computing known tokens beyond its last one is prefilling (this includes
      // recomputation after preemption); one new token on a fully computed prefix is a decode.
      // Either way its attention reads everything computed before (cached prefix included).
      const context = e.request.numComputed;
      if (context >= e.request.numPromptTokens && e.numNew === 1) {
        work.decodeSeqs++;
        work.decodeContextTokens += context;
      } else {
        work.prefillTokens += e.numNew;
        work.prefillAttentionPairs += chunkAttentionPairs(e.numNew, context);
      }
    }
    this.busy = true;
    const loadMs = lora === null ? 0 : this.loadAdapters(stepAdapters) * lora.loadMs;
    return { durationMs: stepDurationMs(this.latency, work) + loadMs, entries, ...work };
  }

  /** Applies a step's results at its end time. */
  complete(step: ScheduledStep, nowMs: number): StepResult {
    const bs = this.config.blockSize;
    const outputs: TokenOutput[] = [];
    let anyFinished = false;
    for (const { request: req, numNew } of step.entries) {
      if (req.status !== "running") continue; // preempted later in the same schedule pass
      req.numComputed += numNew;
      this.cacheComputedBlocks(req, bs);
      if (req.numComputed < req.tokens.length) continue; // prefill chunk, no token yet
      const vocab = this.config.outputVocab;
      const token = vocab[req.rng.int(vocab.length)] as number;
      req.tokens.push(token);
      req.outputTokens++;
      this.counters.generationTokens++;
      const first = req.outputTokens === 1;
      if (first) {
        req.firstTokenMs = nowMs;
        this.counters.promptTokens += req.numPromptTokens;
      }
      const finished = req.outputTokens >= req.spec.maxTokens;
      if (finished) {
        req.status = "finished";
        req.finishMs = nowMs;
        this.pool.release(req.blocks);
        req.blocks = [];
        this.counters.requestsFinished++;
        anyFinished = true;
      }
      outputs.push({ request: req, token, first, finished });
    }
    if (anyFinished) this.running = this.running.filter((r) => r.status === "running");
    this.busy = false;
    return { outputs, events: this.pool.drainEvents() };
  }

  /** Drops a request (client went away); its blocks are released as on completion. */
  abort(req: EngineRequest): void {
    if (req.status === "finished") return;
    if (req.status === "waiting") {
      const i = this.waiting.indexOf(req);
      if (i >= 0) this.waiting.splice(i, 1);
    } else {
      this.running = this.running.filter((r) => r !== req);
      this.pool.release(req.blocks);
      req.blocks = [];
    }
    req.status = "finished";
  }

  /** Makes the step's adapters the most recently used, loading those not in GPU memory (the
   * least recently used others are dropped); returns how many were loaded. */
  private loadAdapters(step: ReadonlySet<string>): number {
    const lru = this.loadedAdapters;
    const max = this.config.lora?.maxLoras ?? 0;
    let loads = 0;
    for (const a of step) {
      const at = lru.indexOf(a);
      if (at >= 0) lru.splice(at, 1);
      else loads++;
      lru.push(a);
    }
    while (lru.length > max) lru.shift();
    this.adapterLoads += loads;
    return loads;
  }

  /** Blocks after a GPU hit of `hit` that the CPU tier holds, contiguous, up to `maxHit` in all. */
  private cpuHit(hashes: readonly BlockHash[], hit: number, maxHit: number): number {
    const cpu = this.pool.cpu;
    if (cpu === null) return 0;
    let n = 0;
    while (hit + n < Math.min(maxHit, hashes.length) && cpu.has(hashes[hit + n] as BlockHash)) n++;
    return n;
  }

  /** Tokens of this prompt's prefix cached here now (capped as at admission). */
  probeCachedTokens(
    tokens: readonly number[],
    keys: { loraName?: string | null; cacheSalt?: string | null },
  ): number {
    const hasher = new BlockHasher(this.config.blockSize, this.config.hashRoot, keys);
    hasher.update(tokens, tokens.length);
    return this.probeCachedHashes(hasher.hashes, tokens.length);
  }

  /** As probeCachedTokens, for block hashes computed once by the caller (same root and size). */
  probeCachedHashes(hashes: readonly BlockHash[], numTokens: number): number {
    const bs = this.config.blockSize;
    return this.pool.longestCachedPrefix(hashes, Math.floor((numTokens - 1) / bs)) * bs;
  }

  /** vLLM's /reset_prefix_cache: refused while requests hold blocks. */
  resetPrefixCache(): boolean {
    return this.pool.reset();
  }

  /** Events not tied to a step (e.g. a reset) waiting to be published. */
  drainEvents(): KvEvent[] {
    return this.pool.drainEvents();
  }

  private preempt(req: EngineRequest): void {
    this.pool.release(req.blocks);
    req.blocks = [];
    req.numComputed = 0;
    req.nextBlockToCache = 0;
    req.status = "waiting";
    req.preemptions++;
    this.counters.preemptions++;
    this.running.pop();
    this.waiting.unshift(req);
  }

  private cacheComputedBlocks(req: EngineRequest, bs: number): void {
    const full = req.hasher.update(req.tokens, req.numComputed);
    const hashes = req.hasher.hashes;
    let runStart = -1;
    const flush = (end: number) => {
      if (runStart < 0) return;
      this.pool.emit({
        type: "BlockStored",
        blockHashes: hashes.slice(runStart, end),
        parentBlockHash: runStart === 0 ? null : (hashes[runStart - 1] as BlockHash),
        tokenIds: req.tokens.slice(runStart * bs, end * bs),
        blockSize: bs,
        loraName: req.spec.loraName ?? null,
        loraId: req.spec.loraId ?? null,
        extraKeys: extraKeysFor(req, runStart, end),
      });
      runStart = -1;
    };
    for (let b = req.nextBlockToCache; b < full; b++) {
      const h = hashes[b] as BlockHash;
      const ok = this.pool.cacheBlock(
        req.blocks[b] as number,
        h,
        b === 0 ? null : (hashes[b - 1] as BlockHash),
        req.tokens.slice(b * bs, (b + 1) * bs),
      );
      if (ok) {
        if (runStart < 0) runStart = b;
      } else flush(b);
    }
    flush(full);
    if (full > req.nextBlockToCache) req.nextBlockToCache = full;
  }
}

/** One entry per block, null for a block without extra keys: vLLM sends the list whenever it
 * stores blocks (block_pool.py: `extra_keys_list if extra_keys_list else None`). */
function extraKeysFor(req: EngineRequest, start: number, end: number): (string[] | null)[] {
  const keys = { loraName: req.spec.loraName, cacheSalt: req.spec.cacheSalt };
  const out: (string[] | null)[] = [];
  for (let b = start; b < end; b++) out.push(blockExtraKeys(b, keys));
  return out;
}
