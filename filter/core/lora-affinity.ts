// LoRA adapters: which pool and adapter a request's `model` names, and what sending it to each
// slot costs for the adapter (docs/configuration.md "LoRA adapters"). Pure: no host calls.
//
// A vLLM engine holds at most max_loras adapters in GPU memory and batches requests of those
// only; a request for another adapter waits until one is loaded (its load time, once) or, when
// all are taken by adapters with running requests, until one of those drains. So, per slot, in
// prefill-token equivalents added to the routing cost (route-decision.ts):
//   0                 the adapter has running requests there (kvr.load), or this VM routed one
//                     of its requests there within the last speculative TTL and the other
//                     adapters leave it a place
//   loadCost          the slot has room for another adapter (or its list is truncated)
//   fullCost          max_loras other adapters are active there (running or waiting)
// An adapter with only waiting requests there is queued for a place like any other: it costs a
// load where the others leave room, the full cost where they do not (GAIE's lora-affinity scorer
// likewise ranks "waiting" below "room for another").
//   0                 the engine reports no adapters at all (no information: decide as before)
// A slot that must load the adapter also gets its place in the adapter's home order: up to
// HOME_SPREAD × loadCost more, by the slot's position in its pool, rotated by the adapter's id, so
// that every gateway and thread computes the same order and each slot is first for as many
// adapters as any other. Gateways see each other's routes only through reports and scrapes
// (hundreds of ms); without a shared order each placed an adapter where it alone saw room, and an
// adapter requested through G gateways and T threads ended up loaded on up to G × T slots, every
// slot holding more adapters than its places (the LoRA bench: 12–15 adapters per rank of 4 places
// against 5–6 with one deciding VM). With the order, an adapter nobody runs yet goes to the same
// slot from everywhere, and moves down its order only when a slot's load outweighs the step. A
// rotation rather than a hash: 32 adapters hashed onto 8 slots put 7 or 8 first on some slot, more
// than its places, and those evicted each other at low load.
import { CfgImage, LoadImage, SlotsImage } from "./cache-images";

/** Routes remembered per VM: enough for a burst over a few dozen slots between two scrapes. */
const RECENT: i32 = 64;
/**
 * How far the home order spreads the slots that must load an adapter, in loads: the last slot of
 * the order costs (1 + HOME_SPREAD) × loadCost. Enough to outweigh the queued requests one gateway
 * cannot see of another's between reports (a few), so gateways agree; a slot loaded that much more
 * still loses its turn. 4: measured on the LoRA bench's development seeds (docs/operations.md).
 */
const HOME_SPREAD: f64 = 4;

/** The place, in [0, 1), of the k-th of a pool's n slots in adapter `adapter`'s home order. */
export function homeOrder(adapter: i32, k: i32, n: i32): f64 {
  return <f64>((((k - adapter) % n) + n) % n) / <f64>n;
}

/** The pool and adapter a request's `model` names, when it names an adapter. */
export class AdapterMatch {
  pool: i32 = -1;
  /** Index in the pool's adapter table; -1: the model is no adapter. */
  adapter: i32 = -1;
  /** The adapter's name: the `lora` of the request's chunk hashes (wire-format §3). */
  name: ArrayBuffer = new ArrayBuffer(0);

  /** Looks `model` up among every pool's adapters; false (pool -1) when it is none of them. */
  find(cfg: CfgImage, model: usize, modelLen: i32): bool {
    this.pool = -1;
    this.adapter = -1;
    for (let p = 0; p < cfg.pools.length; p++) {
      const adapters = cfg.pools[p].adapters;
      for (let a = 0; a < adapters.length; a++) {
        const n = adapters[a];
        if (n.byteLength === modelLen && memory.compare(changetype<usize>(n), model, <usize>modelLen) === 0) {
          this.pool = p;
          this.adapter = a;
          this.name = n;
          return true;
        }
      }
    }
    return false;
  }
}

export class LoraAffinity {
  /** Per slot: the adapter cost of the last fill(); read by the decider. */
  cost: StaticArray<f64> = new StaticArray<f64>(0);
  private recentSlot: StaticArray<i32> = new StaticArray<i32>(RECENT);
  private recentAdapter: StaticArray<i32> = new StaticArray<i32>(RECENT);
  private recentPool: StaticArray<i32> = new StaticArray<i32>(RECENT);
  private recentAt: StaticArray<u64> = new StaticArray<u64>(RECENT);
  private next: i32 = 0;

  constructor() {
    for (let i = 0; i < RECENT; i++) this.recentSlot[i] = -1;
  }

  /** This VM sent a request of (pool, adapter) to `slot`: it counts as active there for `ttlMs`. */
  routed(pool: i32, adapter: i32, slot: i32, nowMs: u64, ttlMs: u32): void {
    if (adapter < 0 || slot < 0 || ttlMs === 0) return;
    const i = this.next;
    this.next = (i + 1) % RECENT;
    this.recentSlot[i] = slot;
    this.recentPool[i] = pool;
    this.recentAdapter[i] = adapter;
    this.recentAt[i] = nowMs + <u64>ttlMs;
  }

  /**
   * Fills cost[s] for every slot of `pool` for a request of adapter `adapter` (an id ≥ 0); false
   * when no slot of the pool reports its adapters (every cost 0: nothing to agree on, the request
   * is routed as any other).
   */
  fill(cfg: CfgImage, slots: SlotsImage, loads: LoadImage, pool: i32, adapter: i32, nowMs: u64): bool {
    if (this.cost.length < slots.count) this.cost = new StaticArray<f64>(slots.count);
    let n = 0;
    for (let s = 0; s < slots.count; s++) if (<i32>slots.pool[s] === pool) n++;
    let informed = false;
    let k = 0;
    for (let s = 0; s < slots.count; s++) {
      if (<i32>slots.pool[s] !== pool) {
        this.cost[s] = 0;
        continue;
      }
      if (loads.maxLoras(s) !== 0) informed = true;
      this.cost[s] = this.slotCost(cfg, loads, pool, s, adapter, nowMs, homeOrder(adapter, k++, n));
    }
    return informed;
  }

  private slotCost(
    cfg: CfgImage,
    loads: LoadImage,
    pool: i32,
    s: i32,
    adapter: i32,
    nowMs: u64,
    home: f64,
  ): f64 {
    const max = loads.maxLoras(s);
    if (max === 0) return 0;
    const listed = loads.listedAdapters(s);
    // Running there: loaded. Only waiting there: queued for a place like any other adapter (the
    // engine may be full), so it is judged by the places the others take.
    let self: u32 = 0;
    for (let i = 0; i < listed; i++) {
      if (loads.adapterId(s, i) !== <u32>adapter) continue;
      if (loads.adapterRunning(s, i)) return 0;
      self = 1;
    }
    // This VM's routes the metric does not show yet: one of them may be the adapter itself.
    let others: u32 = 0;
    let routedHere = false;
    for (let r = 0; r < RECENT; r++) {
      if (this.recentSlot[r] !== s || this.recentPool[r] !== pool || this.recentAt[r] <= nowMs) continue;
      const a = this.recentAdapter[r];
      if (a === adapter) routedHere = true;
      else if (!this.listedOrSeen(loads, s, a, listed, r, pool, nowMs)) others++;
    }
    let active = loads.activeAdapters(s) - self + others;
    if (active > max) active = max;
    // This thread's recent route of the adapter loads it there when the others leave it a place;
    // on a full slot that route is only waiting, and more of its requests would wait behind it.
    if (routedHere && active < max) return 0;
    // A truncated list may hold the adapter among the unnamed: no worse than a load.
    const order = <f64>cfg.loraLoadCost * HOME_SPREAD * home;
    if (active < max || <u32>listed < loads.activeAdapters(s)) return <f64>cfg.loraLoadCost + order;
    return <f64>cfg.loraFullCost + order;
  }

  /** Whether recent entry r's adapter `a` is in the metric's list or an earlier recent entry. */
  private listedOrSeen(loads: LoadImage, s: i32, a: i32, listed: i32, r: i32, pool: i32, nowMs: u64): bool {
    for (let i = 0; i < listed; i++) if (loads.adapterId(s, i) === <u32>a) return true;
    for (let q = 0; q < r; q++)
      if (
        this.recentSlot[q] === s &&
        this.recentPool[q] === pool &&
        this.recentAdapter[q] === a &&
        this.recentAt[q] > nowMs
      )
        return true;
    return false;
  }
}
