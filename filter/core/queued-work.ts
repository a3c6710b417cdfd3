// The queued term of the cost model: prefill work waiting at a slot ahead of a new request, and
// the decoding requests the engine's metrics do not count yet.
//
// The gateway counts its own requests exactly: every VM keeps its requests per slot (LocalQueue)
// and publishes them in shared data (kvr.un.<t>) whenever they change and on every tick, and reads
// the other VMs' before each decision — so a gateway's threads decide as one. Per slot:
// - the gateway's unanswered requests (routed, no first byte: their prefill is still ahead), each
//   priced by its own uncached prompt, which the VM that routed it knows from its decision, less
//   the prefill the slot has done on them since it started on them, at the speed the VM's answers
//   show (aged: LocalQueue.gatewayTokensAt);
// - the engine's `waiting` at its last scrape (prompts unknown → QUEUED_TOKENS each), less the
//   gateway's unanswered requests that scrape may already show (counted above at their own size);
// - other gateways' unanswered requests the engine's metrics do not show yet: kvr.load's in-flight
//   field, the control plane's sum of every gateway's last report, less what this gateway reported
//   (the most its leader reported within a report horizon, kvr.ifr: a request of this gateway
//   that ended since is never charged as another gateway's), QUEUED_TOKENS each;
// - running: the engine's count at its last scrape, plus the gateway's decoding requests that
//   scrape may not show yet.
// A request is "unseen" until the slot's load has changed twice since it was routed: the first
// change may come from a scrape taken before the request reached the engine (the engine's stats
// and the scrape both lag), the second cannot.
import { LoadImage } from "./cache-images";

/** Weight of an older prefill-speed sample against the next (LocalQueue.learn): ~20 samples' memory. */
const LEARN_DECAY: f64 = 0.95;

/** Prefill work assumed for each queued request whose prompt this VM does not know (tokens). */
export const QUEUED_TOKENS: f64 = 512;

/** Requests the engine has queued that are not the gateway's, plus other gateways' unseen ones. */
function othersOf(waiting: f64, elsewhere: f64, seen: f64): f64 {
  return (waiting > seen ? waiting - seen : 0) + elsewhere;
}

/**
 * Requests queued at a slot ahead of a new one (least-load's count). `elsewhere`: other gateways'
 * unseen requests; `seen`: the gateway's unanswered requests the engine's last scrape may show;
 * `count`: all of the gateway's unanswered requests there.
 */
export function queuedRequests(waiting: f64, elsewhere: f64, seen: f64, count: f64): f64 {
  return othersOf(waiting, elsewhere, seen) + count;
}

/** Prefill tokens queued at a slot ahead of a new one: unknown prompts at QUEUED_TOKENS, the gateway's at their own uncached size. */
export function queuedTokens(waiting: f64, elsewhere: f64, seen: f64, tokens: f64): f64 {
  return othersOf(waiting, elsewhere, seen) * QUEUED_TOKENS + tokens;
}

/** Requests queued at slot s that are not this gateway's, as the load image and the gateway's view show them. */
function othersAt(loads: LoadImage, s: i32, local: LocalQueue | null): f64 {
  const elsewhere = elsewhereOf(<f64>loads.inflight(s), local !== null ? local.gatewayReportedAt(s) : 0);
  return othersOf(<f64>loads.waiting(s), elsewhere, local !== null ? local.gatewaySeenAt(s) : 0);
}

/** Requests queued at slot s ahead of a new one, as the load image and the gateway's view show them (least-load's count, and shedding's). */
export function queuedAt(loads: LoadImage, s: i32, local: LocalQueue | null): f64 {
  return othersAt(loads, s, local) + (local !== null ? local.gatewayCountAt(s) : 0);
}

/** Prefill tokens queued at slot s that are not this gateway's (unknown prompts, QUEUED_TOKENS each). */
export function othersQueued(loads: LoadImage, s: i32, local: LocalQueue): f64 {
  return othersAt(loads, s, local) * QUEUED_TOKENS;
}

/** Other gateways' unseen requests: the fleet's count less this gateway's reported share. */
export function elsewhereOf(fleet: f64, gatewayReported: f64): f64 {
  return fleet > gatewayReported ? fleet - gatewayReported : 0;
}

/**
 * What the engine's metrics say about slot s, as one number: it changes whenever a scrape finds
 * anything different (a request admitted, queued, finished; KV usage moving with every step).
 * Health is part of it, so a slot coming back starts a fresh count.
 */
export function loadSignature(loads: LoadImage, s: i32): u64 {
  return (
    <u64>loads.running(s) |
    ((<u64>loads.waiting(s)) << 16) |
    ((<u64>loads.kvPermille(s)) << 32) |
    ((<u64>(loads.healthy(s) ? 1 : 0)) << 48)
  );
}

/**
 * This VM's requests per slot: those not answered yet (no first byte: their prefill is ahead) with
 * their uncached prompt tokens, and of all it routed, those the engine's metrics may not show
 * yet — split into unanswered and decoding ones. A request is unseen until the slot's load has
 * changed twice since it was routed: the first change may come from a scrape taken before the
 * request reached the engine (the engine's stats and the scrape both lag), the second cannot.
 * The two most recent windows are kept per slot; a change drops the older one.
 */
export class LocalQueue {
  private pending: StaticArray<u32> = new StaticArray<u32>(0);
  private tokens: StaticArray<f64> = new StaticArray<f64>(0);
  /** Since when (ms) the slot has been working through this VM's unanswered requests: when the
   * first of them was routed there (after the work queued ahead of it), or when the last answer
   * came (gatewayTokensAt). */
  private since: StaticArray<f64> = new StaticArray<f64>(0);
  /** Decayed sums of answered requests' uncached tokens and of the ms their slots took since their
   * `since`: the slots' prefill speed as this VM has seen it (learn). */
  private learnedTokens: f64 = 0;
  private learnedMs: f64 = 0;
  /** The clock the aged token counts are read at (ms): the VM's decision or board write time. */
  nowMs: f64 = 0;
  /** Load changes seen per slot (a request's window is the count when it was routed). */
  private window: StaticArray<u32> = new StaticArray<u32>(0);
  private signature: StaticArray<u64> = new StaticArray<u64>(0);
  /** Unseen unanswered / decoding requests routed in the current and the previous window. */
  private pendingNow: StaticArray<u32> = new StaticArray<u32>(0);
  private pendingBefore: StaticArray<u32> = new StaticArray<u32>(0);
  private decodingNow: StaticArray<u32> = new StaticArray<u32>(0);
  private decodingBefore: StaticArray<u32> = new StaticArray<u32>(0);
  /** This gateway's other VMs' requests as they last published them: unanswered ones, their
   * tokens, and the unanswered and decoding ones the engine's metrics may not show yet. */
  private siblingsPending: StaticArray<u32> = new StaticArray<u32>(0);
  private siblingsTokens: StaticArray<f64> = new StaticArray<f64>(0);
  /** The latest `since` of the other VMs with unanswered requests at the slot (see since). */
  private siblingsSince: StaticArray<f64> = new StaticArray<f64>(0);
  private siblingsUnseen: StaticArray<u32> = new StaticArray<u32>(0);
  private siblingsDecoding: StaticArray<u32> = new StaticArray<u32>(0);
  /** The most this gateway's leader reported per slot lately (its share of kvr.load's count). */
  private gatewayReported: StaticArray<u32> = new StaticArray<u32>(0);

  /** Per slot of the load image: running and waiting at the last change of either, and whether
   * the slot's queue looked blocked on admission then (admissionBlockedAt). */
  private admitRunning: StaticArray<u32> = new StaticArray<u32>(0);
  private admitWaiting: StaticArray<u32> = new StaticArray<u32>(0);
  private admitBlocked: StaticArray<bool> = new StaticArray<bool>(0);

  /** One past the highest slot this VM ever queued a request at, and past the highest the gateway view names. */
  private ownHigh: i32 = 0;
  private viewHigh: i32 = 0;

  get slots(): i32 {
    return this.pending.length;
  }

  /** Slots below this are the only ones where this VM can have requests (loops stop here). */
  get ownSlots(): i32 {
    return this.ownHigh;
  }

  private ensure(slot: i32): void {
    if (slot < this.pending.length) return;
    const n = slot + 64;
    this.pending = grownU32(this.pending, n);
    this.window = grownU32(this.window, n);
    this.pendingNow = grownU32(this.pendingNow, n);
    this.pendingBefore = grownU32(this.pendingBefore, n);
    this.decodingNow = grownU32(this.decodingNow, n);
    this.decodingBefore = grownU32(this.decodingBefore, n);
    this.siblingsPending = grownU32(this.siblingsPending, n);
    this.siblingsUnseen = grownU32(this.siblingsUnseen, n);
    this.siblingsDecoding = grownU32(this.siblingsDecoding, n);
    this.gatewayReported = grownU32(this.gatewayReported, n);
    const tokens = new StaticArray<f64>(n);
    const since = new StaticArray<f64>(n);
    const siblingsTokens = new StaticArray<f64>(n);
    const siblingsSince = new StaticArray<f64>(n);
    const signature = new StaticArray<u64>(n);
    for (let i = 0; i < this.tokens.length; i++) {
      tokens[i] = this.tokens[i];
      since[i] = this.since[i];
      siblingsTokens[i] = this.siblingsTokens[i];
      siblingsSince[i] = this.siblingsSince[i];
      signature[i] = this.signature[i];
    }
    this.tokens = tokens;
    this.since = since;
    this.siblingsTokens = siblingsTokens;
    this.siblingsSince = siblingsSince;
    this.signature = signature;
  }

  /**
   * Reads a load image's running and waiting counts. A slot's queue is blocked on admission when,
   * from one change of those counts to the next, requests waited both times and running did not
   * grow: the engine admits a request only as another finishes (at its max_num_seqs, or its KV
   * cache full). A queue behind prefill grows running as the engine admits its requests. Nor is
   * a slot blocked while it lists an adapter with only waiting requests: those wait for one of
   * its max_loras places, and the engine admits other requests past them.
   */
  observeAdmission(load: LoadImage): void {
    const n = load.count;
    if (this.admitRunning.length < n) {
      this.admitRunning = grownU32(this.admitRunning, n);
      this.admitWaiting = grownU32(this.admitWaiting, n);
      const b = new StaticArray<bool>(n);
      for (let i = 0; i < this.admitBlocked.length; i++) b[i] = this.admitBlocked[i];
      this.admitBlocked = b;
    }
    for (let s = 0; s < n; s++) {
      const running = load.running(s);
      const waiting = load.waiting(s);
      const r0 = unchecked(this.admitRunning[s]);
      const w0 = unchecked(this.admitWaiting[s]);
      if (running === r0 && waiting === w0) continue;
      this.admitBlocked[s] = waiting > 0 && w0 > 0 && running <= r0 && !adapterWaits(load, s);
      this.admitRunning[s] = running;
      this.admitWaiting[s] = waiting;
    }
  }

  /** Whether slot s's queue looked blocked on admission at the last change of its counts. */
  admissionBlockedAt(s: i32): bool {
    return s < this.admitBlocked.length && unchecked(this.admitBlocked[s]);
  }

  /** The slot's load now reads `sig`: on a change, the older window's requests are shown. */
  observe(slot: i32, sig: u64): void {
    if (slot < 0 || slot >= this.pending.length || unchecked(this.signature[slot]) === sig) return;
    this.signature[slot] = sig;
    this.window[slot]++;
    this.pendingBefore[slot] = this.pendingNow[slot];
    this.decodingBefore[slot] = this.decodingNow[slot];
    this.pendingNow[slot] = 0;
    this.decodingNow[slot] = 0;
  }

  /**
   * A request was routed to `slot` at `nowMs` (default: the queue's clock, nowMs) while its load
   * read `sig`, with `aheadTokens` of others' prefill queued there before it; returns its window
   * (for answer / end).
   */
  add(slot: i32, sig: u64, tokens: f64, nowMs: f64 = -1, aheadTokens: f64 = 0): u32 {
    if (slot < 0) return 0;
    this.ensure(slot);
    if (slot >= this.ownHigh) this.ownHigh = slot + 1;
    this.observe(slot, sig);
    if (this.pending[slot] === 0) {
      // The slot starts on it once the work ahead of it (others' requests) is done.
      const rate = this.prefillRate;
      this.since[slot] = (nowMs >= 0 ? nowMs : this.nowMs) + (rate > 0 ? aheadTokens / rate : 0);
    }
    this.pending[slot]++;
    this.tokens[slot] += tokens;
    this.pendingNow[slot]++;
    return unchecked(this.window[slot]);
  }

  /**
   * The request routed in `window` got its first byte at `nowMs`: its prefill is done. It decodes
   * at `slot` unless `slot` only prefilled it (a disaggregated pool's prefill slot). Once per
   * request. The slot's next unanswered request is taken to start its prefill now.
   */
  answer(slot: i32, window: u32, tokens: f64, decodes: bool, nowMs: f64 = -1): void {
    if (!this.unanswer(slot, window, tokens)) return;
    const at = nowMs >= 0 ? nowMs : this.nowMs;
    // The slot got through its prompt in the time since it started on this VM's queue there.
    this.learn(tokens, at - this.since[slot]);
    this.since[slot] = at;
    if (!decodes) return;
    const w = this.window[slot];
    if (window === w) this.decodingNow[slot]++;
    else if (window + 1 === w) this.decodingBefore[slot]++;
  }

  /** The request routed in `window` ended; `answered`: after its first byte (answer was called). */
  end(slot: i32, window: u32, tokens: f64, answered: bool): void {
    if (!answered) {
      this.unanswer(slot, window, tokens);
      return;
    }
    if (slot < 0 || slot >= this.pending.length) return;
    const w = this.window[slot];
    if (window === w) this.decodingNow[slot] = dec(this.decodingNow[slot]);
    else if (window + 1 === w) this.decodingBefore[slot] = dec(this.decodingBefore[slot]);
  }

  private unanswer(slot: i32, window: u32, tokens: f64): bool {
    if (slot < 0 || slot >= this.pending.length || unchecked(this.pending[slot]) === 0) return false;
    this.pending[slot]--;
    const left = this.tokens[slot] - tokens;
    this.tokens[slot] = this.pending[slot] === 0 || left < 0 ? 0 : left;
    const w = this.window[slot];
    if (window === w) this.pendingNow[slot] = dec(this.pendingNow[slot]);
    else if (window + 1 === w) this.pendingBefore[slot] = dec(this.pendingBefore[slot]);
    return true;
  }

  /** Unanswered requests at `slot`. */
  countAt(slot: i32): f64 {
    return slot >= 0 && slot < this.pending.length ? <f64>unchecked(this.pending[slot]) : 0;
  }

  /** Their uncached prompt tokens. */
  tokensAt(slot: i32): f64 {
    return slot >= 0 && slot < this.pending.length ? unchecked(this.tokens[slot]) : 0;
  }

  /** Since when (ms) the slot has been working on them: valid while countAt(slot) > 0. */
  sinceAt(slot: i32): f64 {
    return slot >= 0 && slot < this.pending.length ? unchecked(this.since[slot]) : 0;
  }

  /** `tokens` less what the slots' learned prefill speed gets through in `elapsedMs` (≥ 0). */
  private aged(tokens: f64, elapsedMs: f64): f64 {
    const rate = this.prefillRate;
    if (elapsedMs <= 0 || rate <= 0) return tokens;
    const left = tokens - rate * elapsedMs;
    return left > 0 ? left : 0;
  }

  /**
   * A slot answered a request of `tokens` uncached tokens `elapsedMs` after it started on it (its
   * `since`): a sample of how fast a slot gets through the VM's queued prefill — with whatever
   * else it runs meanwhile (others' prompts, decoding rows), which is the speed aging needs, not
   * an idle slot's. Decayed sums (a sample weighs 1, older ones × LEARN_DECAY: the speed follows
   * the engines' load); the ratio of sums weighs long prompts most.
   */
  private learn(tokens: f64, elapsedMs: f64): void {
    if (!(elapsedMs > 0) || !(tokens > 0)) return;
    this.learnedTokens = this.learnedTokens * LEARN_DECAY + tokens;
    this.learnedMs = this.learnedMs * LEARN_DECAY + elapsedMs;
  }

  /** Uncached prompt tokens a slot prefills per ms as learned (0 before the first sample). */
  get prefillRate(): f64 {
    return this.learnedMs > 0 ? this.learnedTokens / this.learnedMs : 0;
  }

  /** Unanswered requests at `slot` the engine's metrics may not show yet. */
  unseenPendingAt(slot: i32): u32 {
    return slot >= 0 && slot < this.pending.length
      ? unchecked(this.pendingNow[slot]) + unchecked(this.pendingBefore[slot])
      : 0;
  }

  /** Decoding requests at `slot` the engine's metrics may not show yet. */
  unseenDecodingAt(slot: i32): u32 {
    return slot >= 0 && slot < this.pending.length
      ? unchecked(this.decodingNow[slot]) + unchecked(this.decodingBefore[slot])
      : 0;
  }

  /** Unanswered requests at `slot` the last scrapes show (waiting or prefilling). */
  seenAt(slot: i32): f64 {
    return this.countAt(slot) - <f64>this.unseenPendingAt(slot);
  }

  /** Forgets the other VMs' counts before they are read again (addSiblings / setGatewayReported). */
  clearGatewayView(): void {
    const n = this.viewHigh;
    this.viewHigh = 0;
    for (let i = 0; i < n; i++) {
      this.siblingsPending[i] = 0;
      this.siblingsTokens[i] = 0;
      this.siblingsSince[i] = 0;
      this.siblingsUnseen[i] = 0;
      this.siblingsDecoding[i] = 0;
      this.gatewayReported[i] = 0;
    }
  }

  /**
   * Adds another VM of this gateway's requests at `slot`, as it published them: `since`, when the
   * slot started on its unanswered ones (ms; default: now, nothing done yet).
   */
  addSiblings(slot: i32, pending: u32, tokens: f64, unseen: u32, decoding: u32, since: f64 = -1): void {
    if (slot < 0) return;
    this.ensure(slot);
    if (slot >= this.viewHigh) this.viewHigh = slot + 1;
    if (pending > 0) {
      const at = since >= 0 ? since : this.nowMs;
      if (this.siblingsPending[slot] === 0 || at > this.siblingsSince[slot]) this.siblingsSince[slot] = at;
    }
    this.siblingsPending[slot] += pending;
    this.siblingsTokens[slot] += tokens;
    this.siblingsUnseen[slot] += unseen;
    this.siblingsDecoding[slot] += decoding;
  }

  /** This gateway reported up to `n` unseen unanswered requests at `slot` lately. */
  setGatewayReported(slot: i32, n: u32): void {
    if (slot < 0) return;
    this.ensure(slot);
    if (slot >= this.viewHigh) this.viewHigh = slot + 1;
    this.gatewayReported[slot] = n;
  }

  gatewayReportedAt(slot: i32): f64 {
    return slot >= 0 && slot < this.gatewayReported.length ? <f64>unchecked(this.gatewayReported[slot]) : 0;
  }

  private has(slot: i32): bool {
    return slot >= 0 && slot < this.pending.length;
  }

  /** The gateway's unanswered requests at `slot` (this VM's and the others'). */
  gatewayCountAt(slot: i32): f64 {
    return this.has(slot)
      ? <f64>unchecked(this.pending[slot]) + <f64>unchecked(this.siblingsPending[slot])
      : 0;
  }

  /** Their uncached prompt tokens, whole (what the share mirror compares with whole queued prompts). */
  gatewayPromptTokensAt(slot: i32): f64 {
    return this.has(slot) ? unchecked(this.tokens[slot]) + unchecked(this.siblingsTokens[slot]) : 0;
  }

  /**
   * Their uncached prompt tokens not yet prefilled, as of nowMs. The slot works through the
   * gateway's unanswered requests there as one queue, at the learned prefill speed, since the
   * latest of the VMs' `since` (a first request routed to an empty queue, or an answer): a prompt
   * is not priced whole until its first byte — a slot that started on it long ago is nearly done,
   * one that just got it is not. A cost that only counts tokens cannot tell them apart; a rotation
   * (round robin) gets it right by its timing (docs/operations.md "Queued prefill, aged").
   */
  gatewayTokensAt(slot: i32): f64 {
    if (!this.has(slot)) return 0;
    const tokens = unchecked(this.tokens[slot]) + unchecked(this.siblingsTokens[slot]);
    if (tokens <= 0) return 0;
    let since: f64 = -Infinity;
    if (unchecked(this.pending[slot]) > 0) since = unchecked(this.since[slot]);
    if (unchecked(this.siblingsPending[slot]) > 0 && unchecked(this.siblingsSince[slot]) > since)
      since = unchecked(this.siblingsSince[slot]);
    return since === -Infinity ? tokens : this.aged(tokens, this.nowMs - since);
  }

  /** The gateway (this VM and the others, as last read) has no unanswered request anywhere. */
  gatewayIdle(): bool {
    const n = this.ownHigh > this.viewHigh ? this.ownHigh : this.viewHigh;
    for (let s = 0; s < n; s++) if (this.pending[s] !== 0 || this.siblingsPending[s] !== 0) return false;
    return true;
  }

  /** Those of them the engine's last scrapes may show (waiting or prefilling). */
  gatewaySeenAt(slot: i32): f64 {
    if (!this.has(slot)) return 0;
    const unseen = <f64>this.unseenPendingAt(slot) + <f64>this.siblingsUnseen[slot];
    const count = this.gatewayCountAt(slot);
    return count > unseen ? count - unseen : 0;
  }

  /** The gateway's unanswered requests at `slot` the engine's metrics may not show yet (this VM's and the others'). */
  gatewayUnseenAt(slot: i32): u32 {
    return this.has(slot) ? this.unseenPendingAt(slot) + unchecked(this.siblingsUnseen[slot]) : 0;
  }

  /** The gateway's decoding requests at `slot` that the last scrape may not count as running. */
  unseenRunningAt(slot: i32): f64 {
    return this.has(slot)
      ? <f64>this.unseenDecodingAt(slot) + <f64>unchecked(this.siblingsDecoding[slot])
      : 0;
  }
}

function dec(n: u32): u32 {
  return n > 0 ? n - 1 : 0;
}

/**
 * The leader's side of kvr.ifr: the most it reported per slot in the current and the previous
 * report horizon. A horizon covers the time a reported count can stay in kvr.load: until the
 * next report replaces it and the sync brings the new sum (plus the ticks around it).
 */
export class ReportedMax {
  private now: StaticArray<u32> = new StaticArray<u32>(0);
  private before: StaticArray<u32> = new StaticArray<u32>(0);
  private horizonEndsMs: u64 = 0;

  get slots(): i32 {
    return this.now.length;
  }

  /** Starts a report at `nowMs`: a new horizon when the current one is over. */
  begin(nowMs: u64, horizonMs: u64): void {
    if (nowMs < this.horizonEndsMs) return;
    const old = this.before;
    this.before = this.now;
    for (let i = 0; i < old.length; i++) old[i] = 0;
    this.now = old;
    this.horizonEndsMs = nowMs + horizonMs;
  }

  /** The report carries `n` unseen requests at `slot`. */
  record(slot: i32, n: u32): void {
    if (slot < 0) return;
    if (slot >= this.now.length) {
      const size = slot + 64;
      this.now = grownU32(this.now, size);
      this.before = grownU32(this.before, size);
    }
    if (n > this.now[slot]) this.now[slot] = n;
  }

  at(slot: i32): u32 {
    if (slot < 0 || slot >= this.now.length) return 0;
    const a = this.now[slot];
    const b = this.before[slot];
    return a > b ? a : b;
  }
}

function grownU32(a: StaticArray<u32>, n: i32): StaticArray<u32> {
  const out = new StaticArray<u32>(n);
  for (let i = 0; i < a.length; i++) out[i] = a[i];
  return out;
}

/** Whether slot s's load lists an adapter whose requests all wait (none runs): it waits for a place. */
function adapterWaits(load: LoadImage, s: i32): bool {
  const n = load.listedAdapters(s);
  for (let i = 0; i < n; i++) if (!load.adapterRunning(s, i)) return true;
  return false;
}
