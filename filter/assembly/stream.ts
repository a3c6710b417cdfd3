// The request path (DESIGN §5): header hygiene and the rank-header policy, body buffering, then
// scan → render → hash → prefix walk → decision → destination and rank headers. Everything that
// can fail falls back to a documented safe answer; nothing here may trap.

import * as imports from "@gcoredev/proxy-wasm-sdk-as/assembly/imports";
import { ByteBuf } from "../core/byte-buf";
import {
  CfgImage,
  DEFAULT_PRIORITY_HEADER,
  DP_EXTERNAL,
  ENGINE_DYNAMO,
  ENGINE_SGLANG,
  LoadImage,
  POOL_DYNAMO_LEGACY,
  POOL_SGLANG_BODY_RANK,
  RANK_HONOR,
  RANK_IGNORE,
  RANK_REJECT,
  SlotsImage,
} from "../core/cache-images";
import { fallbackLimit } from "../core/fallback-limit";
import { decodeString } from "../core/json-string";
import { MAX_DESTINATION_FALLBACKS } from "../core/plugin-config";
import { PrefixWalk } from "../core/prefix-walk";
import {
  PRIORITY_CRITICAL,
  PRIORITY_INVALID,
  PRIORITY_NAMES,
  PRIORITY_STANDARD,
  parsePriority,
} from "../core/priority";
import { loadSignature, othersQueued } from "../core/queued-work";
import { parseRank, RANK_INVALID } from "../core/rank-header";
import { RENDER_NONE } from "../core/render";
import { writeFinished, writeSession, writeSpeculative } from "../core/report-writer";
import { ENDPOINT_CHAT, ENDPOINT_COMPLETIONS } from "../core/request-hash";
import {
  BYTES_PER_TOKEN,
  findPool,
  OUT_BAD_PIN,
  OUT_NO_SLOT,
  OUT_PINNED,
  OUT_PREFIX_HIT,
} from "../core/route-decision";
import { servedSlot } from "../core/served-slot";
import { dropSaturated, firstSlot } from "../core/shedding";
import { SERVED_UNREAD, USAGE_SSE, UsageScan, usageModeOf } from "../core/usage-scan";
import { cache } from "./cache-view";
import { HeaderSnapshot } from "./header-snapshot";
import {
  bufferSize,
  getHeader,
  getHeaderString,
  getHeaderValues,
  getProperty,
  HostBytes,
  hasHeader,
  nowMs,
  nowNs,
  REQUEST_BODY,
  REQUEST_HEADERS,
  RESPONSE_BODY,
  RESPONSE_HEADERS,
  readBuffer,
  releaseSnapshot,
  removeHeader,
  sendJson,
  setHeader,
  setHeaderBytes,
  setHeaderNumber,
  snapshotRequestHeaders,
  useRequestHeaders,
} from "./host";
import { stats } from "./metrics";
import { sessionOutcome } from "./session";
import { vm } from "./state";
import { readSubsetHint } from "./subset-hint";
import { trustedForPin, trustedForPriority } from "./trust";

/**
 * Headers only kvroute may set, whatever the rank-header policy: a client's copy is dropped
 * (SSRF, choosing a worker). The table in docs/configuration.md "Client routing headers" lists
 * every header kvroute writes and what each policy does with a client's copy.
 */
const ROUTING_HEADERS: string[] = [
  "x-gateway-destination-endpoint",
  "x-dynamo-worker-instance-id",
  "x-worker-instance-id",
  "x-dynamo-prefill-instance-id",
  "x-prefill-instance-id",
  "x-dynamo-routing-mode",
];
/** Client rank headers a pin can come from under `honor` (vLLM/SGLang, Dynamo, Dynamo's alias). */
const RANK_HEADERS: string[] = ["x-data-parallel-rank", "x-dynamo-dp-rank", "x-dp-rank"];
/** Prefill rank headers: never a pin (kvroute picks the prefill worker); 400 under `reject`. */
const PREFILL_RANK_HEADERS: string[] = ["x-dynamo-prefill-dp-rank", "x-prefill-dp-rank"];

/** Outcome codes of reports (docs/wire-format.md §6). */
const REPORT_LOAD_ONLY: u32 = 0;
const REPORT_PREFIX_HIT: u32 = 1;
const REPORT_PINNED: u32 = 2;
const REPORT_REJECTED: u32 = 3;
const REPORT_FAIL_OPEN: u32 = 4;
const REPORT_SPECULATIVE_HIT: u32 = 5;
const REPORT_SHED: u32 = 6;

/** Speculative routes reported per request: the prompt's first chunks, enough for the prefix walk. */
const MAX_SPECULATIVE_CHUNKS: i32 = 256;

/** Envoy's attribute for the host of the upstream attempt (the one that answered, after retries). */
const UPSTREAM_ADDRESS = "upstream\0address";

const fallbackSlots = new StaticArray<i32>(<i32>MAX_DESTINATION_FALLBACKS);
const DESTINATION = "x-gateway-destination-endpoint";
/** Bitmap of the slots a subset hint allows (words × u64), reused per request. */
const allowedBitmap = new ByteBuf(64);
/** Idle response scanners (unmanaged, usage-scan.ts), reused by the next answers. */
const idleScans: UsageScan[] = [];
const MAX_IDLE_SCANS: i32 = 1024;
/** How much of an over-limit body is scanned for its `model`. */
const HEAD_BYTES: u32 = 64 * 1024;
/** A body (or an answer's chunk) as the host copied it in: read in place, freed when done. */
const hostBody = new HostBytes();

// Return codes of the HTTP callbacks (Proxy-Wasm 0.2.1 as Envoy maps them, REFERENCE §5).
export const HEADERS_CONTINUE: u32 = 0;
export const HEADERS_STOP: u32 = 1;
export const DATA_CONTINUE: u32 = 0;
export const DATA_STOP_AND_BUFFER: u32 = 1;

/**
 * Others' prefill queued at `slot` ahead of a request this VM routes there — read only when the
 * VM has nothing unanswered there, the one case LocalQueue.add uses it (to place the slot's start).
 */
function workAhead(load: LoadImage, slot: i32): f64 {
  return vm.queue.countAt(slot) > 0 ? 0 : othersQueued(load, slot, vm.queue);
}

export class KvrouteStream {
  constructor(readonly id: u32) {}

  private endpoint: i32 = 0;
  private pin: i64 = -1;
  private pinHeader: string = "";
  private routed: bool = false;
  /** The decision's time (µs) and the cached share of its prompt (per mille), recorded at the end; -1: none. */
  private decisionUs: i64 = -1;
  private cachedPermille: i64 = -1;
  private slot: i32 = -1;
  private prefillSlot: i32 = -1;
  private outcome: u32 = REPORT_LOAD_ONLY;
  private promptBytes: u32 = 0;
  private cachedBytes: u32 = 0;
  private startMs: u64 = 0;
  private firstByteMs: u64 = 0;
  private status: u32 = 0;
  private requestId: ArrayBuffer | null = null;
  /** Counted in vm.queue's decoding requests (after its first byte) until its end. */
  private decoding: bool = false;
  /** Counted in vm.queue (queued-work.ts) until its first byte or its end. */
  private queued: bool = false;
  /** Its LoRA adapter and slot while counted in vm.lora's requests in flight (adapter -1: not). */
  private loraAdapter: i32 = -1;
  private loraSlot: i32 = -1;
  private queueWindow: u32 = 0;
  private prefillQueueWindow: u32 = 0;
  private uncachedTokens: f64 = 0;
  /** Reads the engine's served cached tokens from a routed request's answer (null: not read). */
  private usage: UsageScan | null = null;
  /** A streamed answer outside the sample: reported as not read (SERVED_UNREAD). */
  private usageUnread: bool = false;
  /** The request's priority level (filter/core/priority.ts), after the trust check. */
  private priority: i32 = PRIORITY_STANDARD;
  /** A shed request's report names a slot of its pool (it reached none); -1 otherwise. */
  private shedSlot: i32 = -1;
  /** The body parsed as JSON (its prompt can be hashed). */
  private parsed: bool = false;
  /** The gateway sent a subset hint (GAIE): an empty one is a 503 whatever the fail mode. */
  private subset: bool = false;
  /** The session's slot before this request (-1: none). */
  private remembered: i32 = -1;
  /** The request's headers, read once in on_request_headers, until the decision. */
  private headers: HeaderSnapshot = new HeaderSnapshot();

  onRequestHeaders(endOfStream: bool): u32 {
    // The request's headers are read once (header-snapshot.ts): every lookup below, and the
    // decision's, answers from that copy.
    const snap = this.headers;
    snapshotRequestHeaders(snap);
    useRequestHeaders(snap);
    const status = this.requestHeaders(endOfStream);
    useRequestHeaders(null);
    if (this.routed || this.endpoint === 0) releaseSnapshot(snap);
    return status;
  }

  private requestHeaders(endOfStream: bool): u32 {
    this.startMs = nowMs();
    for (let i = 0; i < ROUTING_HEADERS.length; i++) removeHeader(REQUEST_HEADERS, ROUTING_HEADERS[i]);
    if (!cache.ready) cache.refresh();
    // Before the rank policy: that strips the secret header the trust check may need.
    this.readPriority();
    if (!this.applyRankPolicy()) return HEADERS_STOP;

    if (!cache.ready) {
      // Nothing to route with yet: decide now rather than buffer a body for nothing.
      this.failMode(vm.config.failOpen, "no routing cache yet");
      this.routed = true;
      return this.routedHeadersStatus();
    }
    const path = getHeaderString(REQUEST_HEADERS, ":path");
    const method = getHeaderString(REQUEST_HEADERS, ":method");
    this.endpoint = path === null || method !== "POST" ? 0 : endpointOf(path);
    if (this.endpoint === 0) return HEADERS_CONTINUE;
    this.readRequestId();
    if (endOfStream) {
      // No body: nothing to hash; route by load (the engine will answer the bad request).
      this.route(0, 0);
      return this.routedHeadersStatus();
    }
    // Keep the headers: the destination is known only once the body is in. Envoy delivers the
    // body while headers wait only with allow_on_headers_stop_iteration; the root's tick rescues
    // streams that never see their body (routeWithoutBody).
    vm.waiting.set(this.id, this.startMs);
    return HEADERS_STOP;
  }

  /**
   * Called from the root's tick for a stream whose body never arrived: Envoy runs without
   * allow_on_headers_stop_iteration, so it paused everything. Route by load and resume.
   */
  routeWithoutBody(): void {
    vm.waiting.delete(this.id);
    if (this.routed) return;
    this.route(0, 0);
  }

  onRequestBody(size: u32, endOfStream: bool): u32 {
    if (vm.waiting.has(this.id)) {
      vm.bodiesReachWaitingHeaders.add(vm.config);
      vm.waiting.delete(this.id);
    }
    if (this.endpoint === 0 || this.routed) return DATA_CONTINUE;
    if (size > vm.config.maxBodyBytes) {
      stats.inc(stats.bodyTooLarge);
      // Route by load; the first bytes usually name the model, which picks the pool.
      const head = hostBody;
      if (!readBuffer(REQUEST_BODY, 0, size < HEAD_BYTES ? size : HEAD_BYTES, head)) this.route(0, 0);
      else this.route(head.ptr, head.len, true);
      head.release();
      return this.status >= 400 ? DATA_STOP_AND_BUFFER : DATA_CONTINUE;
    }
    if (!endOfStream) return DATA_STOP_AND_BUFFER;
    const body = hostBody;
    if (!readBuffer(REQUEST_BODY, 0, size, body)) this.route(0, 0);
    else this.route(body.ptr, body.len);
    body.release();
    // After a local reply the request must not continue upstream.
    return this.status >= 400 ? DATA_STOP_AND_BUFFER : DATA_CONTINUE;
  }

  /**
   * Trailers end a body whose last data frame did not (HTTP/2 and gRPC-style clients): the body
   * buffered so far is the whole body, decided now as at its end. Without this the body went
   * upstream with the trailers, undecided.
   */
  onRequestTrailers(): u32 {
    if (this.endpoint === 0 || this.routed) return HEADERS_CONTINUE;
    this.onRequestBody(bufferSize(REQUEST_BODY), true);
    return this.routedHeadersStatus();
  }

  /** Headers were stopped; after a local reply they stay stopped (the reply ends the stream). */
  private routedHeadersStatus(): u32 {
    return this.status >= 400 ? HEADERS_STOP : HEADERS_CONTINUE;
  }

  /**
   * Client rank headers and the pin secret (docs/configuration.md "Client routing headers").
   * `ignore` strips the rank headers; `reject` answers 400 to any of them; `honor` pins the one
   * value the decode-rank headers carry, strictly parsed, when the client is trusted — a
   * repeated header or two headers that disagree are as invalid as a malformed value (400). An
   * untrusted client's valid pin is stripped and counted. The secret header never travels
   * upstream. False when a local reply was sent.
   */
  private applyRankPolicy(): bool {
    const cfg = cache.cfg;
    const policy = cfg === null ? RANK_IGNORE : cfg.rankPolicy;
    const secret = cfg === null ? "" : cfg.secretHeaderName;
    let seen = "";
    let pinSeen = false;
    for (let i = 0; i < RANK_HEADERS.length && !pinSeen; i++) {
      if (!hasHeader(REQUEST_HEADERS, RANK_HEADERS[i])) continue;
      seen = RANK_HEADERS[i];
      pinSeen = true;
    }
    for (let i = 0; i < PREFILL_RANK_HEADERS.length && seen.length === 0; i++) {
      if (hasHeader(REQUEST_HEADERS, PREFILL_RANK_HEADERS[i])) seen = PREFILL_RANK_HEADERS[i];
    }
    let ok = true;
    if (seen.length > 0 && policy === RANK_REJECT) {
      this.reject(400, `client rank header ${seen} is not accepted by this gateway`, "rank_header_rejected");
      ok = false;
    } else if (pinSeen && policy === RANK_HONOR) {
      ok = this.readPin(cfg!);
    }
    // Stripped whatever the outcome: the engine must only ever see kvroute's own choice.
    for (let i = 0; i < RANK_HEADERS.length; i++) removeHeader(REQUEST_HEADERS, RANK_HEADERS[i]);
    for (let i = 0; i < PREFILL_RANK_HEADERS.length; i++)
      removeHeader(REQUEST_HEADERS, PREFILL_RANK_HEADERS[i]);
    if (secret.length > 0) removeHeader(REQUEST_HEADERS, secret);
    return ok;
  }

  /**
   * `honor`: every value of every decode-rank header must be the same valid rank. Sets the pin
   * when the client is trusted; false after a 400.
   */
  private readPin(cfg: CfgImage): bool {
    let rank: i64 = -1;
    let first = "";
    for (let i = 0; i < RANK_HEADERS.length; i++) {
      const values = getHeaderValues(REQUEST_HEADERS, RANK_HEADERS[i]);
      for (let j = 0; j < values.length; j++) {
        const v = values[j];
        const r = parseRank(changetype<usize>(v), v.byteLength);
        if (r === RANK_INVALID) {
          this.reject(
            400,
            `${RANK_HEADERS[i]} must be one non-negative integer written in plain decimal`,
            "invalid_rank_header",
          );
          return false;
        }
        if (rank >= 0 && r !== rank) {
          this.reject(
            400,
            `${RANK_HEADERS[i]} ${r} disagrees with ${first} ${rank}: send one rank`,
            "invalid_rank_header",
          );
          return false;
        }
        if (rank < 0) {
          rank = r;
          first = RANK_HEADERS[i];
        }
      }
    }
    if (rank < 0) return true;
    if (!trustedForPin(cfg)) {
      stats.inc(stats.untrustedPin);
      return true;
    }
    this.pin = rank;
    this.pinHeader = first;
    return true;
  }

  /**
   * The priority header (docs/configuration.md "Priority"): every value it carries must name the
   * same level exactly, else it is invalid — counted, and the request is standard (a priority is a
   * hint, not worth refusing a request over). `critical` needs a trusted client
   * (trustedForPriority); an untrusted claim is counted and downgraded to standard. The header is
   * kvroute's own: it never travels upstream, whatever it held.
   */
  private readPriority(): void {
    const cfg = cache.cfg;
    const name = cfg === null ? DEFAULT_PRIORITY_HEADER : cfg.priorityHeaderName;
    const values = getHeaderValues(REQUEST_HEADERS, name);
    if (values.length > 0) {
      let level = PRIORITY_INVALID;
      for (let i = 0; i < values.length; i++) {
        const v = parsePriority(changetype<usize>(values[i]), values[i].byteLength);
        if (v === PRIORITY_INVALID || (i > 0 && v !== level)) {
          level = PRIORITY_INVALID;
          break;
        }
        level = v;
      }
      if (level === PRIORITY_INVALID) {
        stats.inc(stats.priorityInvalid);
        level = PRIORITY_STANDARD;
      } else if (level === PRIORITY_CRITICAL && (cfg === null || !trustedForPriority(cfg))) {
        stats.inc(stats.priorityUntrusted);
        level = PRIORITY_STANDARD;
      }
      this.priority = level;
    }
    removeHeader(REQUEST_HEADERS, name);
  }

  private readRequestId(): void {
    const id = vm.config.requestIdHeader;
    if (id.length > 0 && this.requestId === null) this.requestId = getHeader(REQUEST_HEADERS, id);
  }

  private reject(status: u32, message: string, code: string, countRejected: bool = true): void {
    // Reported (onLog) under the client's request id; the headers are still readable here.
    this.readRequestId();
    if (countRejected) stats.inc(stats.rejected);
    this.outcome = REPORT_REJECTED;
    this.status = status;
    this.routed = true;
    sendJson(
      status,
      `{"error":{"message":${jsonString(message)},"type":"invalid_request_error","code":"${code}"}}`,
      `kvroute_${code}`,
    );
  }

  /**
   * Decides and writes the outbound headers. `body` may be 0 (load-only). The stages, in order:
   * read the view (the cache images this VM holds and the gateway board: one shared-data read),
   * scan the body for its pool, hash the prompt, gather the candidates, walk the prefix index
   * (buckets this VM does not hold yet are read), score, write the headers, and publish this
   * request on the board (one write).
   */
  private route(body: usize, bodyLen: i32, truncated: bool = false): void {
    useRequestHeaders(this.headers);
    this.decide(body, bodyLen, truncated);
    useRequestHeaders(null);
    releaseSnapshot(this.headers);
  }

  private decide(body: usize, bodyLen: i32, truncated: bool): void {
    this.routed = true;
    const startedNs = nowNs();
    if (!cache.ready) cache.refresh();
    const cfg = cache.cfg;
    const slots = cache.slots;
    const load = cache.load;
    if (cfg === null || slots === null || load === null) {
      this.failMode(vm.config.failOpen, "no routing cache yet");
      return;
    }
    // One clock read serves the decision: its ms for TTLs and stamps, its ns for the timer.
    const now = startedNs / 1000000;
    vm.readBoard(now);
    const pool = this.poolOf(cfg, body, bodyLen, truncated);
    if (pool < 0) return;
    if (this.parsed) this.hashPrompt(cfg, pool, body);
    const words = cfg.slotWords;
    const bitmap = this.gatherCandidates(slots, load, pool, words);
    if (cfg.pools[pool].shedding && this.shed(cfg, pool, load, bitmap, words)) return;
    const specDepth = this.walk(cfg, slots, bitmap, words, now);
    const prompt = vm.hasher.renderer.out.len > 0 ? vm.hasher.renderer.out.len : bodyLen;
    const session = this.pin < 0 ? vm.sessions.hashOf(cfg) : 0;
    const outcome = this.score(cfg, slots, load, pool, bitmap, words, prompt, session, now);
    if (outcome === OUT_BAD_PIN || outcome === OUT_NO_SLOT) return;
    this.commit(cfg, load, pool, body, bodyLen, truncated, prompt, outcome, specDepth, session, now);
    vm.writeBoard(now);
    // Recorded with the request's end (onLog), like the cached ratio: the histograms' host calls
    // stay off the request's way to the engine.
    this.decisionUs = <i64>((nowNs() - startedNs) / 1000);
  }

  /**
   * The pool, from the request's model; a body that names none (malformed, cut at the size limit
   * before the model) goes to the default pool, or the only pool there is. -1 when the request
   * was answered here (unknown model, or nothing to route with).
   */
  private poolOf(cfg: CfgImage, body: usize, bodyLen: i32, truncated: bool): i32 {
    const h = vm.hasher;
    h.hashCount = 0;
    h.renderer.out.len = 0;
    h.saltOverride.len = 0;
    let pool = -1;
    let modelNamed = false;
    const adapter = vm.adapter;
    adapter.adapter = -1;
    this.parsed = false;
    if (body !== 0) {
      const err = h.scan.scan(body, bodyLen);
      this.parsed = err >= 0;
      if (!this.parsed && !truncated) stats.inc(stats.parseErrors);
      if (h.scan.modelLen > 0) {
        modelNamed = true;
        // Model names are short; an escaped one is decoded, a plain one compared in place.
        let model = body + <usize>h.scan.modelOff;
        let modelLen = h.scan.modelLen;
        if (h.scan.modelEsc) {
          const m = vm.message;
          m.len = 0;
          decodeString(model, modelLen, true, m);
          model = m.ptr;
          modelLen = m.len;
        }
        // A LoRA adapter's name (lora-affinity.ts) selects its base model's pool; names are unique.
        pool = adapter.find(cfg, model, modelLen) ? adapter.pool : findPool(cfg, model, modelLen);
      }
    }
    if (pool < 0 && modelNamed) {
      stats.inc(stats.noPool);
      this.reject(404, "the requested model is not served by this gateway", "model_not_found", false);
      return -1;
    }
    if (pool < 0) pool = cfg.defaultPool >= 0 ? cfg.defaultPool : cfg.pools.length === 1 ? 0 : -1;
    if (pool < 0) {
      // No model to go by and no pool to fall back to: let the route's own cluster answer.
      this.failMode(vm.config.failOpen, "the request names no model and there is no default pool");
    }
    return pool;
  }

  /** The prompt's chunk hashes (vm.hasher), rendered as the pool's engine will see it. */
  private hashPrompt(cfg: CfgImage, pool: i32, body: usize): void {
    const h = vm.hasher;
    const def = cfg.pools[pool];
    if (def.engine === ENGINE_DYNAMO) this.tenantSalt(h.saltOverride);
    h.renderer.maxStream = <i32>vm.config.maxBodyBytes * 2;
    const adapter = vm.adapter;
    const canonical = def.models.length > 0 ? def.models[0] : new ArrayBuffer(0);
    const status = h.hashForPool(
      body,
      this.endpoint,
      this.endpoint === ENDPOINT_CHAT ? def.template : null,
      def.bosText,
      canonical,
      adapter.adapter >= 0 ? adapter.name : null,
      cfg.chunkSize,
    );
    if (status < 0 || status === RENDER_NONE) h.hashCount = 0;
  }

  /** The pool's eligible slots as a bitmap (vm.buckets), and the decider set up for this request. */
  private gatherCandidates(slots: SlotsImage, load: LoadImage, pool: i32, words: i32): usize {
    const bitmaps = vm.buckets;
    bitmaps.len = 0;
    bitmaps.reserve(words * 16);
    if (vm.walker.depth.length < words * 64) vm.walker = new PrefixWalk(words * 64, words);
    const d = vm.decider;
    // The gateway's subset hint (GAIE): only those endpoints may be the destination.
    const subset = readSubsetHint();
    this.subset = subset !== null;
    d.allowed = subset === null ? 0 : allowedSlots(slots, subset, words);
    d.candidates(slots, load, pool, -1, this.pin, bitmaps.ptr, words);
    vm.observeLoad(load);
    // The gateway's order of near-equal slots is new with every load image; a gateway with nothing
    // unanswered has no burst to keep apart from other gateways', so it takes a new order for each
    // decision (one request after another spreads over equal slots, as random ties did).
    d.gatewayRound = vm.queue.gatewayIdle()
      ? <u64>cache.loadRound ^ ((<u64>++vm.idleDecisions) << 32)
      : <u64>cache.loadRound;
    // The gateway's share of the pool's slots: its place among the gateways that report now.
    d.partIndex = cache.rosterPlace;
    d.partCount = cache.rosterSize;
    return bitmaps.ptr;
  }

  /**
   * The prefix walk over the buckets (vm.walker: cached depth per slot), raised by this gateway's
   * own recent routes of the same prefix, which KV events may not confirm yet. Returns the
   * speculative depth that counted (0: none); its slot is in speculation.slot.
   */
  private walk(cfg: CfgImage, slots: SlotsImage, bitmap: usize, words: i32, now: u64): i32 {
    const h = vm.hasher;
    const walker = vm.walker;
    if (h.hashCount === 0) {
      walker.clear();
      return 0;
    }
    walker.weigh(<f64>cfg.tierGpu, <f64>cfg.tierCpu, <f64>cfg.tierStorage);
    walker.run(h.hashes.ptr, h.hashCount, cfg.buckets, words, slots.count, bitmap, vm.bucketCache);
    const spec = vm.speculation;
    const depth = spec.find(h.hashes.ptr, h.hashCount, now);
    const slot = spec.slot;
    if (slot < 0 || slot >= walker.depth.length || !bitSet(bitmap, slot) || depth <= walker.depth[slot])
      return 0;
    walker.depth[slot] = depth;
    // The routed request computes the prefix on that slot's GPU.
    const cached = <f64>depth * <f64>cfg.tierGpu;
    if (cached > walker.cached[slot]) walker.cached[slot] = cached;
    return depth;
  }

  /**
   * The decision: session preference, adapter costs, then the decider's score. Answers a bad pin
   * (400), an empty subset (503) and no healthy slot (the fail mode) itself.
   */
  private score(
    cfg: CfgImage,
    slots: SlotsImage,
    load: LoadImage,
    pool: i32,
    bitmap: usize,
    words: i32,
    prompt: i32,
    session: u64,
    now: u64,
  ): i32 {
    const d = vm.decider;
    // Session affinity: a pin decides alone; otherwise the session's last slot is a preference.
    d.preferred = session !== 0 ? vm.sessions.find(session, now) : -1;
    d.preferMargin = <f64>cfg.sessionMargin;
    const adapter = vm.adapter;
    if (adapter.adapter >= 0) {
      if (vm.lora.fill(cfg, slots, load, pool, adapter.adapter, now)) d.adapterCost = vm.lora.cost;
    }
    const walker = vm.walker;
    const outcome = d.decide(
      cfg,
      slots,
      load,
      pool,
      bitmap,
      words,
      walker.depth,
      walker.cached,
      prompt,
      this.pin,
      vm.queue,
      bitmap + <usize>(words * 8),
    );
    d.adapterCost = null;
    d.allowed = 0;
    this.remembered = d.preferred;
    d.preferred = -1;
    if (outcome === OUT_BAD_PIN) {
      this.reject(
        400,
        `${this.pinHeader} ${this.pin} is not served by this model; valid ranks are ${d.rankLow} to ${d.rankHigh}`,
        "rank_out_of_range",
      );
    } else if (outcome === OUT_NO_SLOT && this.subset) {
      // GAIE: an empty subset, or none of it eligible, is a 503 whatever the fail mode.
      stats.inc(stats.failClosed);
      this.status = 503;
      sendJson(
        503,
        `{"error":{"message":"no eligible endpoint in the gateway's subset","type":"service_unavailable","code":"no_eligible_endpoint"}}`,
        "kvroute_subset_empty",
      );
    } else if (outcome === OUT_NO_SLOT) {
      this.failMode(!cfg.failClosed, "no healthy slot in the pool");
    } else if (adapter.adapter >= 0) {
      // In flight until its end (lora-affinity.ts): the gateway's other VMs see it on the board
      // from this decision's write.
      if (vm.lora.started(adapter.adapter, d.slot)) {
        this.loraAdapter = adapter.adapter;
        this.loraSlot = d.slot;
      }
    }
    return outcome;
  }

  /**
   * The decision taken: destination and rank headers, the request queued at its slot, its
   * session and speculative routes remembered, its outcome counted.
   */
  private commit(
    cfg: CfgImage,
    load: LoadImage,
    pool: i32,
    body: usize,
    bodyLen: i32,
    truncated: bool,
    prompt: i32,
    outcome: i32,
    specDepth: i32,
    session: u64,
    now: u64,
  ): void {
    const d = vm.decider;
    this.slot = d.slot;
    this.prefillSlot = d.prefillSlot;
    this.promptBytes = <u32>prompt;
    const cached = <u64>d.cachedChunks * <u64>cfg.chunkSize;
    this.cachedBytes = <u32>(cached > <u64>prompt ? <u64>prompt : cached);
    const def = cfg.pools[pool];
    this.writeHeaders(def.engine, def.dpMode, def.flags);
    if ((def.flags & POOL_SGLANG_BODY_RANK) !== 0 && this.parsed && !truncated)
      this.writeBodyRank(body, bodyLen);
    this.enqueue(load, now);
    // The slot whose KV cache receives the prompt: the prefill worker's when disaggregated.
    const cacheSlot = d.prefillSlot >= 0 ? d.prefillSlot : d.slot;
    if (session !== 0) this.rememberSession(session, this.remembered, cacheSlot, cfg.sessionTtlMs, now);
    this.countOutcome(outcome, specDepth > 0 && cacheSlot === vm.speculation.slot);
    if (prompt > 0) this.cachedPermille = <i64>((<u64>this.cachedBytes * 1000) / <u64>prompt);
    const h = vm.hasher;
    if (h.hashCount > 0 && cfg.speculativeTtlMs > 0) {
      this.speculate(cacheSlot, cfg.speculativeTtlMs);
      vm.speculation.record(h.hashes.ptr, h.hashCount, cacheSlot, cfg.speculativeTtlMs, now);
    }
  }

  private countOutcome(outcome: i32, speculativeHit: bool): void {
    if (outcome === OUT_PINNED) {
      this.outcome = REPORT_PINNED;
      stats.inc(stats.pinned);
    } else if (outcome === OUT_PREFIX_HIT && speculativeHit) {
      this.outcome = REPORT_SPECULATIVE_HIT;
      stats.inc(stats.speculativeHit);
    } else if (outcome === OUT_PREFIX_HIT) {
      this.outcome = REPORT_PREFIX_HIT;
      stats.inc(stats.prefixHit);
    } else {
      this.outcome = REPORT_LOAD_ONLY;
      stats.inc(stats.loadOnly);
    }
  }

  /**
   * Overload shedding (filter/core/shedding.ts): the saturated slots leave the candidate bitmap of
   * a standard or sheddable request; when none is left the request is answered 429 with
   * Retry-After. True when it was. No candidate to begin with is not an overload: the fail mode
   * answers that.
   */
  private shed(cfg: CfgImage, pool: i32, load: LoadImage, bitmap: usize, words: i32): bool {
    if (this.priority === PRIORITY_CRITICAL) return false;
    const first = firstSlot(bitmap, words);
    const counts = dropSaturated(cfg.pools[pool], load, bitmap, words, vm.queue, this.priority);
    if (<u32>counts !== 0 || counts >> 32 === 0) return false;
    this.readRequestId();
    stats.inc(stats.shed);
    stats.shedBy(cfg, pool, this.priority);
    this.outcome = REPORT_SHED;
    this.shedSlot = first;
    this.status = 429;
    this.routed = true;
    const level = PRIORITY_NAMES[this.priority];
    sendJson(
      429,
      `{"error":{"message":"every endpoint of this model is saturated for ${level} requests; retry later","type":"too_many_requests","code":"overloaded"}}`,
      "kvroute_shed",
      "retry-after",
      cfg.pools[pool].retryAfterSeconds.toString(),
    );
    return true;
  }

  /**
   * Dynamo's frontend turns a non-empty `x-tenant-id` into the request's cache salt, over any salt
   * in the body (docs/configuration.md "Cache salt"); the engine's blocks are salted with it, so
   * the prefix hashes must be too. The header itself travels on to the frontend.
   */
  private tenantSalt(out: ByteBuf): void {
    const v = getHeader(REQUEST_HEADERS, "x-tenant-id");
    if (v === null || v.byteLength === 0) return;
    // Dynamo reads it with HeaderValue::to_str, which refuses anything but visible ASCII and tab.
    for (let i = 0; i < v.byteLength; i++) {
      const c = load<u8>(changetype<usize>(v) + <usize>i);
      if ((c < 0x20 && c !== 0x09) || c > 0x7e) return;
    }
    out.reserve(v.byteLength);
    memory.copy(out.ptr, changetype<usize>(v), <usize>v.byteLength);
    out.len = v.byteLength;
  }

  private writeHeaders(engine: u8, dpMode: u8, flags: u8): void {
    const slots = cache.slots!;
    const s = this.slot;
    this.writeDestination(engine);
    const rank = slots.headerRank[s];
    if (engine === ENGINE_DYNAMO) {
      const legacy = (flags & POOL_DYNAMO_LEGACY) !== 0;
      this.dynamo(
        "x-dynamo-worker-instance-id",
        "x-worker-instance-id",
        slots.workerId[s].toString(),
        legacy,
      );
      this.dynamo("x-dynamo-dp-rank", "x-dp-rank", slots.globalRank[s].toString(), legacy);
      const p = this.prefillSlot;
      if (p >= 0) {
        this.dynamo(
          "x-dynamo-prefill-instance-id",
          "x-prefill-instance-id",
          slots.workerId[p].toString(),
          legacy,
        );
        this.dynamo("x-dynamo-prefill-dp-rank", "x-prefill-dp-rank", slots.globalRank[p].toString(), legacy);
      }
      setHeader(REQUEST_HEADERS, "x-dynamo-routing-mode", p >= 0 ? "disaggregated" : "aggregated");
      return;
    }
    // vLLM (internal: global rank; hybrid: local index; external: none — the port is the rank)
    // and SGLang read the same header.
    if (rank >= 0 && !(engine !== ENGINE_SGLANG && dpMode === DP_EXTERNAL)) {
      setHeaderNumber(REQUEST_HEADERS, "x-data-parallel-rank", <u64>rank);
    }
  }

  /**
   * The chosen slot's ip:port, followed — when the plugin configuration asks for fallbacks — by
   * the next best endpoints of the pool that take the same rank headers (GAIE's ordered list,
   * walked by a gateway's retries). Dynamo's headers name the worker, so its list is one entry.
   * Written from the slots image's address bytes: no string is made per request.
   */
  private writeDestination(engine: u8): void {
    const slots = cache.slots!;
    const first = slots.addressBytes[this.slot];
    const max = fallbackLimit(engine, vm.config.destinationFallbacks);
    const n = max === 0 ? 0 : vm.decider.fallbacks(slots, max, fallbackSlots);
    if (n === 0) {
      setHeaderBytes(REQUEST_HEADERS, DESTINATION, changetype<usize>(first), first.byteLength);
      return;
    }
    const out = vm.message;
    out.len = 0;
    out.append(changetype<usize>(first), first.byteLength);
    for (let i = 0; i < n; i++) {
      const next = slots.addressBytes[fallbackSlots[i]];
      out.appendByte(0x2c);
      out.append(changetype<usize>(next), next.byteLength);
    }
    setHeaderBytes(REQUEST_HEADERS, DESTINATION, out.ptr, out.len);
  }

  /**
   * SGLang also takes the rank from the body (`routed_dp_rank`). Written as the object's last
   * key: Python's json keeps the last of duplicate keys, so a client's own value cannot win.
   */
  private writeBodyRank(body: usize, bodyLen: i32): void {
    const rank = cache.slots!.headerRank[this.slot];
    if (rank < 0) return;
    let close = bodyLen - 1;
    while (close > 0 && load<u8>(body + <usize>close) !== 0x7d) close--;
    let before = close - 1;
    while (before > 0 && isJsonSpace(load<u8>(body + <usize>before))) before--;
    const empty = load<u8>(body + <usize>before) === 0x7b;
    const insert = String.UTF8.encode(`${empty ? "" : ","}"routed_dp_rank":${rank}`);
    const out = new ArrayBuffer(bodyLen + insert.byteLength);
    const p = changetype<usize>(out);
    memory.copy(p, body, <usize>close);
    memory.copy(p + <usize>close, changetype<usize>(insert), <usize>insert.byteLength);
    memory.copy(p + <usize>(close + insert.byteLength), body + <usize>close, <usize>(bodyLen - close));
    if (imports.proxy_set_buffer_bytes(0, 0, <u32>bodyLen, p, out.byteLength) === 0) {
      // Envoy does not fix content-length after a body rewrite.
      setHeader(REQUEST_HEADERS, "content-length", out.byteLength.toString());
    }
  }

  private dynamo(name: string, legacyName: string, value: string, legacy: bool): void {
    setHeader(REQUEST_HEADERS, name, value);
    if (legacy) setHeader(REQUEST_HEADERS, legacyName, value);
  }

  /** No cache or no healthy slot: forward without a destination (open) or answer 503 (closed). */
  private failMode(open: bool, why: string): void {
    if (open) {
      stats.inc(stats.failOpen);
      this.outcome = REPORT_FAIL_OPEN;
      return;
    }
    stats.inc(stats.failClosed);
    this.status = 503;
    sendJson(
      503,
      `{"error":{"message":${jsonString(why)},"type":"service_unavailable","code":"no_healthy_upstream"}}`,
      "kvroute_fail_closed",
    );
  }

  /**
   * Tells the control plane (through the leader's report) that this prompt's chunks are about to
   * be cached on the chosen slot, so every gateway follows before the engine's KV events arrive.
   */
  private speculate(slot: i32, ttlMs: u32): void {
    const q = vm.reportQueue;
    if (q === 0) return;
    const h = vm.hasher;
    const n = h.hashCount < MAX_SPECULATIVE_CHUNKS ? h.hashCount : MAX_SPECULATIVE_CHUNKS;
    const m = vm.message;
    writeSpeculative(m, slot, h.hashes.ptr, n, ttlMs);
    vm.outbox.add(m);
  }

  /** The session goes on at `slot` (the cache slot): this gateway's table, and the leader's report for the fleet's. */
  private rememberSession(hash: u64, remembered: i32, slot: i32, ttlMs: u32, now: u64): void {
    const outcome = sessionOutcome(remembered, slot);
    const expires = now + <u64>ttlMs;
    vm.sessions.record(hash, slot, expires, now);
    if (vm.reportQueue === 0) return;
    writeSession(vm.message, slot, outcome, hash, expires);
    vm.outbox.add(vm.message);
  }

  /** Queued at its slot (its prompt's prefill at the prefill slot when disaggregated). */
  private enqueue(load: LoadImage, now: u64): void {
    const q = vm.queue;
    this.uncachedTokens = <f64>(this.promptBytes - this.cachedBytes) / BYTES_PER_TOKEN;
    this.queued = true;
    const p = this.prefillSlot;
    const at = <f64>now;
    if (p >= 0)
      this.prefillQueueWindow = q.add(p, loadSignature(load, p), this.uncachedTokens, at, workAhead(load, p));
    this.queueWindow = q.add(
      this.slot,
      loadSignature(load, this.slot),
      p >= 0 ? 0 : this.uncachedTokens,
      at,
      workAhead(load, this.slot),
    );
  }

  /** No longer queued: its first byte came back (prefill done); it decodes at its slot. */
  private dequeue(): void {
    if (!this.queued) return;
    this.queued = false;
    this.decoding = true;
    const q = vm.queue;
    const p = this.prefillSlot;
    const at = <f64>this.firstByteMs;
    if (p >= 0) q.answer(p, this.prefillQueueWindow, this.uncachedTokens, false, at);
    q.answer(this.slot, this.queueWindow, p >= 0 ? 0 : this.uncachedTokens, true, at);
  }

  /** Ended: out of the queue, unanswered or decoding. Whether it was in it. */
  private leaveQueue(): bool {
    const q = vm.queue;
    const p = this.prefillSlot;
    const tokens = p >= 0 ? 0 : this.uncachedTokens;
    if (this.queued) {
      this.queued = false;
      if (p >= 0) q.end(p, this.prefillQueueWindow, this.uncachedTokens, false);
      q.end(this.slot, this.queueWindow, tokens, false);
    } else if (this.decoding) {
      this.decoding = false;
      q.end(this.slot, this.queueWindow, tokens, true);
    } else return false;
    return true;
  }

  onResponseHeaders(): u32 {
    const s = getHeaderString(RESPONSE_HEADERS, ":status");
    if (s !== null && this.status === 0) this.status = <u32>I32.parseInt(s);
    if (this.slot >= 0) {
      this.followServedEndpoint();
      this.startUsageScan();
    }
    return HEADERS_CONTINUE;
  }

  /**
   * A routed request's successful answer, JSON or server-sent events and not compressed, is read
   * as it passes for the engine's served cached tokens (usage-scan.ts), up to usageScanBytes —
   * a stream only when it falls in the sample: reading one costs a host call per chunk.
   */
  private startUsageScan(): void {
    const budget = vm.config.usageScanBytes;
    if (budget === 0 || this.status < 200 || this.status >= 300) return;
    const encoding = getHeader(RESPONSE_HEADERS, "content-encoding");
    const type = getHeader(RESPONSE_HEADERS, "content-type");
    const mode = usageModeOf(
      type === null ? 0 : changetype<usize>(type),
      type === null ? -1 : type.byteLength,
      encoding === null ? 0 : changetype<usize>(encoding),
      encoding === null ? -1 : encoding.byteLength,
    );
    if (mode === 0) return;
    if (mode === USAGE_SSE) {
      const n = vm.config.usageScanStreamSample;
      const k = vm.streamedAnswers;
      vm.streamedAnswers = k + 1 < n ? k + 1 : 0;
      if (k !== 0) {
        this.usageUnread = true;
        return;
      }
    }
    const u = idleScans.length > 0 ? idleScans.pop() : new UsageScan();
    u.begin(mode, budget);
    this.usage = u;
  }

  /** Frees what the stream holds outside the GC (its header snapshot, its usage scanner). */
  release(): void {
    releaseSnapshot(this.headers);
    this.releaseUsageScan();
  }

  /** Hands the usage scanner back to the pool (after the report, or when the stream is deleted). */
  releaseUsageScan(): void {
    const u = this.usage;
    if (u === null) return;
    this.usage = null;
    if (idleScans.length < MAX_IDLE_SCANS) idleScans.push(u);
    else heap.free(changetype<usize>(u));
  }

  /**
   * A gateway that retried down the fallback list got its answer from another endpoint than the
   * first: Envoy's `upstream.address` names the host that answered. Its in-flight count and the
   * finished-request report belong to that slot — when it is one the list could have named
   * (servedSlot); any other address is counted and ignored.
   */
  private followServedEndpoint(): void {
    const slots = cache.slots;
    if (slots === null) return;
    const v = getProperty(UPSTREAM_ADDRESS);
    if (v === null) return;
    const served = servedSlot(slots, this.slot, String.UTF8.decode(v));
    if (served === this.slot) return;
    if (served < 0) {
      stats.inc(stats.servedUnknown);
      return;
    }
    stats.inc(stats.servedElsewhere);
    if (this.queued) {
      // Still unanswered: its queued work moves from the first pick to the slot that serves it.
      const q = vm.queue;
      const tokens = this.prefillSlot >= 0 ? 0 : this.uncachedTokens;
      q.end(this.slot, this.queueWindow, tokens, false);
      const load = cache.load;
      this.queueWindow = q.add(served, load === null ? 0 : loadSignature(load, served), tokens);
    }
    if (this.loraAdapter >= 0) {
      vm.lora.ended(this.loraAdapter, this.loraSlot);
      this.loraAdapter = vm.lora.started(this.loraAdapter, served) ? this.loraAdapter : -1;
      this.loraSlot = served;
    }
    this.slot = served;
  }

  onResponseBody(size: u32, endOfStream: bool): u32 {
    if (this.firstByteMs === 0) {
      this.firstByteMs = nowMs();
      this.dequeue();
      // No board write here: the change goes out with this VM's next one (a decision, an end, a
      // tick); until then the request counts at its slot as unanswered rather than decoding.
    }
    const u = this.usage;
    if (u !== null) {
      // Only this chunk's bytes (the callback continues, so nothing accumulates), within budget.
      if (u.mode !== 0 && size > 0) {
        const n = size < u.budget ? size : u.budget;
        if (n > 0) {
          const chunk = hostBody;
          if (readBuffer(RESPONSE_BODY, 0, n, chunk)) u.feed(chunk.ptr, chunk.len);
          chunk.release();
        }
        if (n < size) u.cut();
      }
      if (endOfStream) u.finish();
    }
    return DATA_CONTINUE;
  }

  onLog(): void {
    // The decision's histograms (decide, commit).
    if (this.decisionUs >= 0) stats.record(stats.decisionUs, <u64>this.decisionUs);
    if (this.cachedPermille >= 0) stats.record(stats.cachedRatio, <u64>this.cachedPermille);
    this.decisionUs = -1;
    this.cachedPermille = -1;
    // Routed inference requests, and every request the filter refused itself — a rank-header 400
    // happens before the path is even looked at, and the control plane's `rejected` count must
    // see it too.
    if (this.endpoint === 0 && this.outcome !== REPORT_REJECTED) return;
    this.report();
    this.releaseUsageScan();
  }

  private report(): void {
    // No longer in flight: the other VMs see it with this VM's next board write (this end's, when
    // it makes one, else the next decision's or tick's).
    if (this.loraAdapter >= 0) {
      vm.lora.ended(this.loraAdapter, this.loraSlot);
      this.loraAdapter = -1;
    }
    // The other VMs stop counting it at once: the end's one board read and write.
    if (this.leaveQueue()) vm.publishEnd(nowMs());
    // 0 = the upstream never answered (reset, refused): counts against the slot's health.
    if (this.slot >= 0 && (this.status === 0 || this.status === 502 || this.status === 503))
      stats.inc(stats.upstreamFailures);
    const q = vm.reportQueue;
    if (q === 0) return;
    const end = nowMs();
    const id = this.requestId;
    const m = vm.message;
    const u = this.usage;
    if (u !== null) u.finish();
    writeFinished(
      m,
      this.outcome === REPORT_SHED ? this.shedSlot : this.slot,
      this.status,
      this.outcome,
      <u32>this.priority,
      this.promptBytes,
      this.cachedBytes,
      this.firstByteMs > 0 ? <u32>(this.firstByteMs - this.startMs) : 0,
      <u32>(end - this.startMs),
      u === null ? (this.usageUnread ? SERVED_UNREAD : 0) : u.flags,
      u === null ? 0 : u.cached,
      id === null ? 0 : changetype<usize>(id),
      id === null ? 0 : id.byteLength,
    );
    vm.outbox.add(m);
  }
}

/** The bitmap of slots whose address is in `subset`. */
function allowedSlots(slots: SlotsImage, subset: string[], words: i32): usize {
  const b = allowedBitmap;
  b.len = 0;
  b.reserve(words * 8);
  memory.fill(b.ptr, 0, <usize>(words * 8));
  const count = slots.count < words * 64 ? slots.count : words * 64;
  for (let s = 0; s < count; s++) {
    if (!subset.includes(slots.address[s])) continue;
    const at = b.ptr + ((<usize>(s >> 6)) << 3);
    store<u64>(at, load<u64>(at) | ((<u64>1) << (<u64>(s & 63))));
  }
  return b.ptr;
}

function endpointOf(path: string): i32 {
  const q = path.indexOf("?");
  const p = q < 0 ? path : path.substring(0, q);
  const paths = vm.config.inferencePaths;
  for (let i = 0; i < paths.length; i++) {
    if (p !== paths[i]) continue;
    return p.endsWith("/completions") && !p.endsWith("/chat/completions")
      ? ENDPOINT_COMPLETIONS
      : ENDPOINT_CHAT;
  }
  return 0;
}

/** Is slot s in the bitmap at p? (A function of its own: route() shadows the `load` builtin.) */
function bitSet(p: usize, s: i32): bool {
  return (load<u64>(p + ((<usize>(s >> 6)) << 3)) & ((<u64>1) << (<u64>(s & 63)))) !== 0;
}

function isJsonSpace(c: u8): bool {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** A JSON string literal for a message we compose (quotes and backslashes escaped). */
function jsonString(s: string): string {
  return `"${s.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}
