// The queued term of the cost model: prefill work waiting at a slot ahead of a new request.
//
// Three sources, none counted twice:
// - this VM's own requests not yet answered (sent, no first byte: their prefill is still ahead):
//   each priced by its own uncached prompt, which this VM knows from its decision. One stops
//   counting at its first byte or its end — at once, on the VM that sent it;
// - the engine's `waiting` at its last scrape (prompts unknown → QUEUED_TOKENS each), less this
//   VM's own requests that scrape already shows (counted above at their own size);
// - requests the engine's metrics do not show yet (sent since the slot's load last changed: a
//   newer scrape shows the rest) that are not this VM's. Every VM publishes its unseen count per
//   slot in shared data (kvr.if.<t>) on every tick, so the other VMs of the same gateway see them
//   one tick later, and a finished one leaves as fast. Other gateways' come from kvr.load's
//   in-flight field, the control plane's sum of every gateway's last report, less what this
//   gateway reported (the most its leader reported within a report horizon, kvr.ifr: a request
//   of this gateway that ended since is never charged as another gateway's).
import { LoadImage } from "./cache-images";

/** Prefill work assumed for each queued request whose prompt this VM does not know (tokens). */
export const QUEUED_TOKENS: f64 = 512;

/** Requests at a slot that are not this VM's: waiting ones the engine shows, and unseen ones. */
function othersOf(waiting: f64, fleet: f64, gatewayReported: f64, siblings: f64, ownSeen: f64): f64 {
  const elsewhere = fleet > gatewayReported ? fleet - gatewayReported : 0;
  const queued = waiting > ownSeen ? waiting - ownSeen : 0;
  return queued + elsewhere + siblings;
}

/**
 * Requests queued at a slot ahead of a new one (least-load's count). `fleet`: every gateway's
 * unseen requests as last reported; `gatewayReported`: this gateway's share of it at most;
 * `siblings`: this gateway's other VMs' unseen requests now; `ownSeen`: this VM's unanswered
 * requests sent before the slot's last load change; `ownCount`: all of them.
 */
export function queuedRequests(
  waiting: f64,
  fleet: f64,
  gatewayReported: f64,
  siblings: f64,
  ownSeen: f64,
  ownCount: f64,
): f64 {
  return othersOf(waiting, fleet, gatewayReported, siblings, ownSeen) + ownCount;
}

/** Prefill tokens queued at a slot ahead of a new one: unknown prompts at QUEUED_TOKENS, ours at their own uncached size. */
export function queuedTokens(
  waiting: f64,
  fleet: f64,
  gatewayReported: f64,
  siblings: f64,
  ownSeen: f64,
  ownTokens: f64,
): f64 {
  return othersOf(waiting, fleet, gatewayReported, siblings, ownSeen) * QUEUED_TOKENS + ownTokens;
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
 * This VM's unanswered requests per slot and their uncached prompt tokens, and how many of them
 * the engine's metrics do not show yet. Requests sent while the slot's load read the same form
 * one window; a changed load signature closes it (a newer scrape shows them, waiting or running).
 * A request answering or ending leaves the unanswered count, and the unseen one if its window is
 * still open.
 */
export class LocalQueue {
  /** Unseen requests per slot (published in kvr.if.<t>). */
  unseen: StaticArray<u32> = new StaticArray<u32>(0);
  private pending: StaticArray<u32> = new StaticArray<u32>(0);
  private tokens: StaticArray<f64> = new StaticArray<f64>(0);
  private window: StaticArray<u32> = new StaticArray<u32>(0);
  private signature: StaticArray<u64> = new StaticArray<u64>(0);
  /** This gateway's other VMs' unseen requests per slot, as of this VM's last tick. */
  private siblings: StaticArray<u32> = new StaticArray<u32>(0);
  /** The most this gateway's leader reported per slot lately (its share of kvr.load's count). */
  private gatewayReported: StaticArray<u32> = new StaticArray<u32>(0);

  get slots(): i32 {
    return this.unseen.length;
  }

  private ensure(slot: i32): void {
    if (slot < this.unseen.length) return;
    const n = slot + 64;
    this.unseen = grownU32(this.unseen, n);
    this.pending = grownU32(this.pending, n);
    this.window = grownU32(this.window, n);
    this.siblings = grownU32(this.siblings, n);
    this.gatewayReported = grownU32(this.gatewayReported, n);
    const tokens = new StaticArray<f64>(n);
    const signature = new StaticArray<u64>(n);
    for (let i = 0; i < this.tokens.length; i++) {
      tokens[i] = this.tokens[i];
      signature[i] = this.signature[i];
    }
    this.tokens = tokens;
    this.signature = signature;
  }

  /** The slot's load now reads `sig`: if it changed since the window opened, the engine shows its requests. */
  observe(slot: i32, sig: u64): void {
    if (slot < 0 || slot >= this.unseen.length) return;
    if (this.unseen[slot] === 0 || this.signature[slot] === sig) return;
    this.unseen[slot] = 0;
    this.window[slot]++;
  }

  /** A request was sent to `slot` while its load read `sig`; returns its window (for remove). */
  add(slot: i32, sig: u64, tokens: f64): u32 {
    if (slot < 0) return 0;
    this.ensure(slot);
    this.observe(slot, sig);
    if (this.unseen[slot] === 0) this.signature[slot] = sig;
    this.unseen[slot]++;
    this.pending[slot]++;
    this.tokens[slot] += tokens;
    return this.window[slot];
  }

  /** The request sent in `window` answered (first byte: its prefill is done) or ended. Once per request. */
  remove(slot: i32, window: u32, tokens: f64): void {
    if (slot < 0 || slot >= this.unseen.length || this.pending[slot] === 0) return;
    this.pending[slot]--;
    const left = this.tokens[slot] - tokens;
    this.tokens[slot] = this.pending[slot] === 0 || left < 0 ? 0 : left;
    if (this.window[slot] === window && this.unseen[slot] > 0) this.unseen[slot]--;
  }

  /** Unanswered requests at `slot`. */
  countAt(slot: i32): f64 {
    return slot >= 0 && slot < this.unseen.length ? <f64>this.pending[slot] : 0;
  }

  /** Those of them the engine's metrics already show. */
  seenAt(slot: i32): f64 {
    return slot >= 0 && slot < this.unseen.length ? <f64>(this.pending[slot] - this.unseen[slot]) : 0;
  }

  /** Their uncached prompt tokens. */
  tokensAt(slot: i32): f64 {
    return slot >= 0 && slot < this.unseen.length ? this.tokens[slot] : 0;
  }

  /** Forgets the gateway view before a tick reads it again (setSiblings / setGatewayReported). */
  clearGatewayView(): void {
    for (let i = 0; i < this.siblings.length; i++) {
      this.siblings[i] = 0;
      this.gatewayReported[i] = 0;
    }
  }

  /** Adds `n` unseen requests of another VM of this gateway at `slot`. */
  addSiblings(slot: i32, n: u32): void {
    if (slot < 0) return;
    this.ensure(slot);
    this.siblings[slot] += n;
  }

  /** This gateway reported up to `n` unseen requests at `slot` lately. */
  setGatewayReported(slot: i32, n: u32): void {
    if (slot < 0) return;
    this.ensure(slot);
    this.gatewayReported[slot] = n;
  }

  siblingsAt(slot: i32): f64 {
    return slot >= 0 && slot < this.siblings.length ? <f64>this.siblings[slot] : 0;
  }

  gatewayReportedAt(slot: i32): f64 {
    return slot >= 0 && slot < this.gatewayReported.length ? <f64>this.gatewayReported[slot] : 0;
  }
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
