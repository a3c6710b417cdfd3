// Picks the slot (and, in a disaggregated pool, the prefill slot) for one request from the
// decoded cache images and the prefix walk's depths. Pure: no host calls, no allocation per
// request once the arrays have their size.
//
// Cost of sending the request to slot s (lower is better), in prefill-token equivalents — the
// shape of Dynamo's KV-router cost (REFERENCE §3), fed with what the gateway can see:
//   overlapWeight  × tokens of the prompt s has not cached — a chunk cached off the GPU counts
//                    as cached in part, at its tier's weight (prefix-walk.ts: uncached =
//                    prompt − chunkSize × cached(s), cached(s) the tier-weighted chunk count)
// + inflightWeight × prefill tokens queued at s: the gateway's unanswered requests (all its
//                    threads') at their own uncached size; the engine's other waiting requests and
//                    other gateways' requests its metrics do not show yet at QUEUED_TOKENS each
//                    — × SATURATED_MISS_SCALE while every candidate's engine shows a queue
//                    — and BLOCKED_QUEUED_TOKENS each for the engine's waiting requests at a slot
//                    whose queue is blocked on admission, while some candidate shows no queue
//                    (not for an adapter's request: adapterCost prices its wait for a place)
// + decodeWeight   × sequences decoding at s (scraped, plus the gateway's the scrape may not
//                    show yet) × DECODE_TOKENS  (queued-work.ts)
// + adapterCost     for a LoRA adapter's request, per slot (lora-affinity.ts)
// + the gateway's order: 0 to GATEWAY_SPREAD tokens per slot, from the gateway's id and its load
//   image (gatewaySeed) — among slots whose costs are within that of each other, gateways that
//   read the same stale image would otherwise all pick the same one — and PARTITION_SPREAD on
//   every slot outside the gateway's share of the pool (partIndex: its place among the gateways
//   that report, kvr.gw), plus inflightWeight × what the gateway whose share it is likely has
//   queued there unseen (share-mirror.ts) — neither for an adapter's request (lora-affinity.ts)
// Tokens are estimated from bytes (BYTES_PER_TOKEN); weights come from the configuration.
import {
  CfgImage,
  LoadImage,
  POLICY_LEAST_LOAD,
  POLICY_RANDOM,
  POLICY_ROUND_ROBIN,
  POOL_DISAGGREGATED,
  ROLE_DECODE,
  ROLE_PREFILL,
  SlotsImage,
} from "./cache-images";
import { elsewhereOf, LocalQueue, QUEUED_TOKENS, queuedAt, queuedTokens } from "./queued-work";
import { keepsSession } from "./session-affinity";
import { ShareMirror } from "./share-mirror";

export { QUEUED_TOKENS };

/** Average UTF-8 bytes per token of English-heavy text in BPE vocabularies of 100k+ entries. */
export const BYTES_PER_TOKEN: f64 = 4;
/** Prefill-token equivalent of one decoding sequence sharing the engine's steps. */
export const DECODE_TOKENS: f64 = 16;

export const OUT_LOAD_ONLY: i32 = 0;
export const OUT_PREFIX_HIT: i32 = 1;
export const OUT_PINNED: i32 = 2;
/** No healthy slot in the pool (or none with the pinned rank): fail mode decides. */
export const OUT_NO_SLOT: i32 = -1;
/** The pinned rank is not served by any slot of the pool: 400 under the honor policy. */
export const OUT_BAD_PIN: i32 = -2;

const MAX_SLOTS: i32 = 65536;

/**
 * Prefill tokens over which a gateway's slot order spreads (gatewaySeed): a quarter of a queued
 * request of unknown size, eight decoding sequences. Measured on the quality bench (2 gateways ×
 * 4 threads): 512 let each gateway's favourite slot win over real load differences at low rates
 * and sent the llm-d workload's new groups to two slots; 128 reorders near ties only.
 */
export const GATEWAY_SPREAD: f64 = 128;

/**
 * Prefill tokens a slot outside the gateway's share of the pool costs more in its order
 * (Decider.partIndex): half a queued request of unknown size, sixteen decoding sequences. Measured
 * on the quality bench (2 gateways × 4 threads, quick points, 2 seeds; docs/operations.md): 128,
 * 256 and 512 all cut the tail of shared prefixes under cache pressure and unshared prompts' p90;
 * 512 also kept a gateway on its loaded share too long under multi-turn cache pressure (p99).
 */
export const PARTITION_SPREAD: f64 = 256;

/**
 * The uncached-prompt term's factor while every candidate's engine shows a queue (waiting ≥ 1 at
 * its last scrape). Then no slot is about to idle, so balancing buys little, and a miss's prefill
 * delays every request that queues behind it at its slot, not only its own answer — and under
 * cache pressure evicts blocks others come back for. Measured on the quality bench (2 gateways ×
 * 4 threads, seeds 1–2, the overloaded points; docs/operations.md): shared prefixes under cache
 * pressure at 128 req/s TTFT p90 495 / 422 → 447 / 397 ms, RAG and the llm-d benchmark above
 * capacity a little better, every point below saturation unchanged. 1 + min(1, waiting / 8) and
 * / 4 did about as well.
 */
export const SATURATED_MISS_SCALE: f64 = 1.5;

/**
 * Prefill-token equivalent of one request waiting at a slot whose queue is blocked on admission
 * (LocalQueue.admissionBlockedAt): it starts only as running requests finish.
 */
export const BLOCKED_QUEUED_TOKENS: f64 = 8192;

/** A share in [0, 1) of slot `s` for the gateway of `seed` (splitmix64 of both). */
export function slotShare(seed: u64, s: i32): f64 {
  let z = seed ^ ((<u64>s + 1) * 0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  z ^= z >> 31;
  return <f64>(z >> 11) / 9007199254740992.0;
}

export class Decider {
  /** Chosen slot (decode slot in a disaggregated pool); -1 when none. */
  slot: i32 = -1;
  /** Prefill slot of a disaggregated pool; -1 otherwise. */
  prefillSlot: i32 = -1;
  /** Cached chunks of the chosen (prefill) slot. */
  cachedChunks: i32 = 0;
  /** Lowest and highest rank-header value the pool serves (for the 400 message); -1 when none. */
  rankLow: i64 = -1;
  rankHigh: i64 = -1;
  private rng: u64;
  private roundRobin: StaticArray<u32> = new StaticArray<u32>(0);
  private costs: StaticArray<f64> = new StaticArray<f64>(0);
  private picks: StaticArray<i32> = new StaticArray<i32>(0);
  /** The last pick's candidates and their costs, kept for fallbacks(). */
  private rankCosts: StaticArray<f64> = new StaticArray<f64>(0);
  private lastCount: i32 = 0;
  /**
   * When non-zero, a bitmap (words × u64) of the slots the gateway allows as a destination (its
   * subset hint): other slots are no candidates, except prefill slots, which are never one.
   */
  allowed: usize = 0;
  /**
   * Session affinity (session-affinity.ts): the slot the request's session last went to, -1 for
   * none — set by the caller per request — and how much costlier than the best it may be and still
   * be kept (prefill-token equivalents).
   */
  preferred: i32 = -1;
  preferMargin: f64 = 0;
  /**
   * When set, per slot prefill tokens added to the cost of the next decisions (lora-affinity.ts),
   * and those decisions take no gateway order or share: an adapter's placement is the fleet's.
   */
  adapterCost: StaticArray<f64> | null = null;
  /**
   * This gateway's order of slots: a share of GATEWAY_SPREAD tokens per slot, from a hash of the
   * gateway's id (0 = no order), the slot id and gatewayRound. Gateways see each other's requests
   * only through reports, so between two of them, gateways that read the same load image would
   * rank near-equal slots alike and send their requests of the same moment to the same slot. All
   * VMs of a gateway share the order (its own requests, counted across its threads, still spread
   * it over its slots); a new order comes with every load image, so no slot is any gateway's
   * favourite for long.
   */
  gatewaySeed: u64 = 0;
  /** Set by the caller per decision: changes whenever the gateway reads a new load image. */
  gatewayRound: u64 = 0;
  /**
   * The gateway's place in the roster of reporting gateways (kvr.gw) and the roster's size, set by
   * the caller per decision; partCount < 2: no partition. With G gateways, candidate k (in slot
   * order) is gateway k mod G's share; every slot outside the gateway's share costs PARTITION_SPREAD
   * more in its order. A gateway counts its own requests exactly (across its threads) and the
   * others' only from reports, so near-equal slots split this way are rarely picked by two
   * gateways at the same moment; a real difference of load or cache still wins. More gateways than
   * candidates: gateway i's share is candidate i mod n.
   */
  partIndex: i32 = -1;
  partCount: i32 = 0;
  /** What another gateway likely has queued unseen at its share, read once per decision. */
  private mirror: ShareMirror = new ShareMirror();

  constructor(seed: u64) {
    this.rng = seed === 0 ? 0x9e3779b97f4a7c15 : seed;
  }

  /** xorshift64*: cheap, good enough to break ties and sample, seeded per VM. */
  private random(): f64 {
    let x = this.rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    this.rng = x;
    return <f64>((x * 0x2545f4914f6cdd1d) >> 11) / 9007199254740992.0;
  }

  private ensure(slots: i32, pools: i32): void {
    if (this.costs.length < slots) {
      this.costs = new StaticArray<f64>(slots);
      this.picks = new StaticArray<i32>(slots);
      this.rankCosts = new StaticArray<f64>(slots);
    }
    if (this.roundRobin.length < pools) this.roundRobin = new StaticArray<u32>(pools);
  }

  /**
   * Writes into `bitmap` (words × u64) the slots of `pool` that can take a request of role
   * `role` (-1: any role usable for the cache-sensitive choice: aggregated or prefill) and,
   * when `pin` ≥ 0, whose rank-header value is `pin`. Returns how many there are.
   */
  candidates(
    slots: SlotsImage,
    loads: LoadImage,
    pool: i32,
    role: i32,
    pin: i64,
    bitmap: usize,
    words: i32,
  ): i32 {
    memory.fill(bitmap, 0, <usize>(words * 8));
    let n = 0;
    const count = slots.count < words * 64 ? slots.count : words * 64;
    for (let s = 0; s < count; s++) {
      if (<i32>slots.pool[s] !== pool || !slots.present(s) || !loads.healthy(s)) continue;
      const r = <i32>slots.role(s);
      if (role >= 0 ? r !== role : r === <i32>ROLE_DECODE) continue;
      if (pin >= 0 && <i64>slots.headerRank[s] !== pin) continue;
      if (this.allowed !== 0 && r !== <i32>ROLE_PREFILL && !bitIn(this.allowed, s)) continue;
      const at = bitmap + ((<usize>(s >> 6)) << 3);
      store<u64>(at, load<u64>(at) | ((<u64>1) << (<u64>(s & 63))));
      n++;
    }
    return n;
  }

  /** The range of rank-header values the pool's present slots serve, into rankLow/rankHigh. */
  rankRange(slots: SlotsImage, pool: i32): void {
    this.rankLow = -1;
    this.rankHigh = -1;
    for (let s = 0; s < slots.count; s++) {
      if (<i32>slots.pool[s] !== pool || !slots.present(s)) continue;
      const r = <i64>slots.headerRank[s];
      if (r < 0) continue;
      if (this.rankLow < 0 || r < this.rankLow) this.rankLow = r;
      if (r > this.rankHigh) this.rankHigh = r;
    }
  }

  /**
   * Prefill tokens beyond QUEUED_TOKENS for the waiting requests at slot s when its queue is
   * blocked on admission: they wait for running requests to finish, not for prefill. Priced only
   * while some candidate admits at once (not `saturated`): on a saturated pool every request waits
   * wherever it goes, and moving it off its cache only adds prefill work. Not for an adapter's
   * request: a queue of adapters waiting for places does not hold back one whose adapter runs,
   * and the adapter's costs (lora-affinity.ts) price the places.
   */
  private blockedQueueTokens(
    s: i32,
    waiting: f64,
    seen: f64,
    saturated: bool,
    local: LocalQueue | null,
  ): f64 {
    if (saturated || this.adapterCost !== null || local === null || waiting <= seen) return 0;
    return local.admissionBlockedAt(s) ? (waiting - seen) * (BLOCKED_QUEUED_TOKENS - QUEUED_TOKENS) : 0;
  }

  /**
   * Chooses among the candidate bitmap. `cached` are tier-weighted cached chunks per slot (zeros
   * for load-only routing). Returns the slot or -1.
   */
  pick(
    cfg: CfgImage,
    loads: LoadImage,
    policy: u8,
    pool: i32,
    bitmap: usize,
    words: i32,
    cached: StaticArray<f64>,
    promptBytes: i32,
    local: LocalQueue | null,
  ): i32 {
    const slotsMax = words * 64 < MAX_SLOTS ? words * 64 : MAX_SLOTS;
    this.ensure(slotsMax, pool + 1);
    let n = 0;
    for (let w = 0; w < words; w++) {
      let bits = load<u64>(bitmap + ((<usize>w) << 3));
      while (bits !== 0) {
        this.picks[n++] = w * 64 + <i32>ctz(bits);
        bits &= bits - 1;
      }
    }
    this.lastCount = 0;
    if (n === 0) return -1;
    if (policy === POLICY_RANDOM) return this.picks[<i32>(this.random() * <f64>n) % n];
    if (policy === POLICY_ROUND_ROBIN) {
      const i = this.roundRobin[pool];
      this.roundRobin[pool] = i + 1;
      return this.picks[<i32>(i % <u32>n)];
    }
    let min = Infinity;
    let max = -Infinity;
    // This decision's gateway order (0: none), mixed once for all candidates. An adapter's request
    // has none: where an adapter runs is one place for the whole fleet, so every gateway must rank
    // the slots alike for it (lora-affinity.ts's home order); a gateway's own order and share would
    // load each adapter once per gateway and overfill every slot's max_loras places.
    const order: u64 =
      this.gatewaySeed !== 0 && policy !== POLICY_LEAST_LOAD && this.adapterCost === null
        ? this.gatewaySeed ^ (this.gatewayRound * 0xd6e8feb86659fd93)
        : 0;
    // This decision's share: candidates whose position mod G is the gateway's place (mod n when
    // there are more gateways than candidates, where position mod G is the position itself).
    const parts = order !== 0 && this.partIndex >= 0 ? this.partCount : 0;
    const home = parts < 2 ? -1 : this.partIndex % n;
    // Saturated: every candidate's engine shows a queue (least-load has no uncached term to scale).
    let saturated = policy !== POLICY_LEAST_LOAD;
    for (let i = 0; i < n && saturated; i++) saturated = loads.waiting(this.picks[i]) > 0;
    const missScale = saturated ? SATURATED_MISS_SCALE : 1;
    const mirror = this.mirror;
    if (home >= 0 && local !== null) mirror.read(local, this.picks, n, parts, home);
    else mirror.clear();
    for (let i = 0; i < n; i++) {
      const s = this.picks[i];
      const waiting = <f64>loads.waiting(s);
      const elsewhere = elsewhereOf(<f64>loads.inflight(s), local !== null ? local.gatewayReportedAt(s) : 0);
      const seen = local !== null ? local.gatewaySeenAt(s) : 0;
      // Scraped running, plus the gateway's decoding requests the scrape may not show yet.
      const running = <f64>loads.running(s) + (local !== null ? local.unseenRunningAt(s) : 0);
      let cost: f64;
      if (policy === POLICY_LEAST_LOAD) {
        cost = running + queuedAt(loads, s, local);
      } else {
        const chunks = s < cached.length ? cached[s] : 0;
        const cachedBytes = chunks * <f64>cfg.chunkSize;
        const uncached = <f64>promptBytes > cachedBytes ? <f64>promptBytes - cachedBytes : 0;
        const tokens = local !== null ? local.gatewayTokensAt(s) : 0;
        const blocked = this.blockedQueueTokens(s, waiting, seen, saturated, local);
        cost =
          <f64>cfg.inflightWeight * blocked +
          <f64>cfg.overlapWeight * missScale * (uncached / BYTES_PER_TOKEN) +
          <f64>cfg.inflightWeight * queuedTokens(waiting, elsewhere, seen, tokens) +
          <f64>cfg.decodeWeight * running * DECODE_TOKENS;
        // In prefill tokens like the rest of this cost; least-load counts requests, so it has none.
        const extra = this.adapterCost;
        if (extra !== null && s < extra.length) cost += extra[s];
      }
      // The cost itself (session margin, fallbacks) and the cost in this gateway's order (the pick).
      this.rankCosts[i] = cost;
      if (order !== 0) cost += GATEWAY_SPREAD * slotShare(order, s);
      if (home >= 0 && i % parts !== home) {
        // Another gateway's share: the spread, plus what that gateway likely has queued there that
        // neither its reports nor the engine's metrics show yet (share-mirror.ts).
        const priced = queuedTokens(waiting, elsewhere, seen, 0);
        cost += PARTITION_SPREAD + <f64>cfg.inflightWeight * mirror.unseenTokens(priced);
      }
      this.costs[i] = cost;
      if (cost < min) min = cost;
      if (cost > max) max = cost;
    }
    this.lastCount = n;
    const t = <f64>cfg.temperature;
    if (t > 0 && max > min) {
      // p ∝ exp(-(c - min) / ((max - min) · T)), Dynamo's sampling (REFERENCE §3).
      let total: f64 = 0;
      for (let i = 0; i < n; i++) {
        const p = Math.exp(-(this.costs[i] - min) / ((max - min) * t));
        this.costs[i] = p;
        total += p;
      }
      let r = this.random() * total;
      for (let i = 0; i < n; i++) {
        r -= this.costs[i];
        if (r <= 0) return this.picks[i];
      }
      return this.picks[n - 1];
    }
    // Cheapest; ties broken at random so equal slots share the load.
    let ties = 0;
    let chosen = -1;
    for (let i = 0; i < n; i++) {
      if (this.costs[i] !== min) continue;
      ties++;
      if (this.random() * <f64>ties < 1) chosen = this.picks[i];
    }
    return chosen;
  }

  /**
   * The whole decision for one request of `pool`. `bitmap` must hold the cache-sensitive
   * candidates (candidates(..., role -1, pin)), `depths` the walk's cached depth over them (any
   * tier) and `cached` its tier-weighted chunks. Returns an OUT_* code and sets slot /
   * prefillSlot / cachedChunks.
   */
  decide(
    cfg: CfgImage,
    slots: SlotsImage,
    loads: LoadImage,
    pool: i32,
    bitmap: usize,
    words: i32,
    depths: StaticArray<i32>,
    cached: StaticArray<f64>,
    promptBytes: i32,
    pin: i64,
    local: LocalQueue | null,
    scratch: usize,
  ): i32 {
    this.slot = -1;
    this.prefillSlot = -1;
    this.cachedChunks = 0;
    const p = cfg.pools[pool];
    let chosen = this.pick(cfg, loads, p.policy, pool, bitmap, words, cached, promptBytes, local);
    if (chosen >= 0 && pin < 0 && this.preferred >= 0)
      chosen = this.preferSession(chosen, p.policy, bitmap, words);
    if (chosen < 0) {
      if (pin < 0) return OUT_NO_SLOT;
      this.rankRange(slots, pool);
      // A rank no slot serves is the client's mistake; a served rank with no healthy slot is ours.
      return this.candidatesAnyHealth(slots, pool, pin) ? OUT_NO_SLOT : OUT_BAD_PIN;
    }
    this.cachedChunks = chosen < depths.length ? depths[chosen] : 0;
    if ((p.flags & POOL_DISAGGREGATED) !== 0 && <i32>slots.role(chosen) === <i32>ROLE_PREFILL) {
      // Prefill where the prefix is cached; decode where there is room (the KV cache moves).
      const decode = this.candidates(slots, loads, pool, ROLE_DECODE, -1, scratch, words);
      const d =
        decode > 0
          ? this.pick(cfg, loads, POLICY_LEAST_LOAD, pool, scratch, words, cached, promptBytes, local)
          : -1;
      if (d < 0) return OUT_NO_SLOT;
      this.prefillSlot = chosen;
      this.slot = d;
    } else {
      this.slot = chosen;
    }
    if (pin >= 0) return OUT_PINNED;
    return this.cachedChunks > 0 ? OUT_PREFIX_HIT : OUT_LOAD_ONLY;
  }

  /**
   * The session's slot instead of `chosen` when it is one of this pick's candidates and its cost is
   * within the margin of the lowest. Random and round-robin keep no costs: there the session stays
   * while its slot is a candidate. Least-load counts requests: the margin counts QUEUED_TOKENS each.
   */
  private preferSession(chosen: i32, policy: u8, bitmap: usize, words: i32): i32 {
    const s = this.preferred;
    if (s === chosen) return s;
    if (s >= words * 64) return chosen;
    if (policy === POLICY_RANDOM || policy === POLICY_ROUND_ROBIN) return bitIn(bitmap, s) ? s : chosen;
    let lowest = Infinity;
    let cost = Infinity;
    for (let i = 0; i < this.lastCount; i++) {
      const c = this.rankCosts[i];
      if (c < lowest) lowest = c;
      if (this.picks[i] === s) cost = c;
    }
    const margin = policy === POLICY_LEAST_LOAD ? this.preferMargin / QUEUED_TOKENS : this.preferMargin;
    return cost !== Infinity && keepsSession(cost, lowest, margin) ? s : chosen;
  }

  /**
   * After decide() chose `slot` (not disaggregated): up to `max` other candidates of that choice,
   * cheapest first (ties: lower slot id), each on an endpoint not in the list yet and with the
   * chosen slot's rank-header value, so a retry that carries the same request headers (and body)
   * is valid there. Writes them to `out`; returns how many. The random and round-robin policies
   * keep no costs: they have no fallbacks.
   */
  fallbacks(slots: SlotsImage, max: i32, out: StaticArray<i32>): i32 {
    const chosen = this.slot;
    if (chosen < 0 || this.prefillSlot >= 0) return 0;
    const rank = slots.headerRank[chosen];
    let k = 0;
    while (k < max && k < out.length) {
      let best = -1;
      let bestCost = Infinity;
      for (let i = 0; i < this.lastCount; i++) {
        const s = this.picks[i];
        if (s === chosen || slots.headerRank[s] !== rank) continue;
        if (!this.newEndpoint(slots, s, chosen, out, k)) continue;
        const c = this.rankCosts[i];
        if (c < bestCost || (c === bestCost && s < best)) {
          best = s;
          bestCost = c;
        }
      }
      if (best < 0) break;
      out[k++] = best;
    }
    return k;
  }

  private newEndpoint(slots: SlotsImage, s: i32, chosen: i32, listed: StaticArray<i32>, n: i32): bool {
    const a = slots.address[s];
    if (a === slots.address[chosen]) return false;
    for (let j = 0; j < n; j++) if (a === slots.address[listed[j]]) return false;
    return true;
  }

  private candidatesAnyHealth(slots: SlotsImage, pool: i32, pin: i64): bool {
    for (let s = 0; s < slots.count; s++) {
      if (<i32>slots.pool[s] === pool && slots.present(s) && <i64>slots.headerRank[s] === pin) return true;
    }
    return false;
  }
}

function bitIn(bitmap: usize, s: i32): bool {
  return (load<u64>(bitmap + ((<usize>(s >> 6)) << 3)) & ((<u64>1) << (<u64>(s & 63)))) !== 0;
}

/** The pool serving `model` (the request's `model` bytes), else the configured default, else -1. */
export function findPool(cfg: CfgImage, model: usize, modelLen: i32): i32 {
  for (let p = 0; p < cfg.pools.length; p++) {
    const models = cfg.pools[p].models;
    for (let m = 0; m < models.length; m++) {
      const name = models[m];
      if (
        name.byteLength === modelLen &&
        memory.compare(changetype<usize>(name), model, <usize>modelLen) === 0
      )
        return p;
    }
  }
  return cfg.defaultPool;
}
