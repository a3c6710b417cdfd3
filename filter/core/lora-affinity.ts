// LoRA adapters: which pool and adapter a request's `model` names, and what sending it to each
// slot costs for the adapter (docs/configuration.md "LoRA adapters"). Pure: no host calls.
//
// A vLLM engine holds at most max_loras adapters in GPU memory and batches requests of those
// only; a request for another adapter waits until one is loaded (its load time, once) or, when
// all are taken by adapters with running requests, until one of those drains. An adapter holds a
// place at a slot while either of two signals shows it there:
//   - the engine's list (kvr.load: adapters with running or waiting requests at the last scrape,
//     hundreds of ms old — it still names adapters whose requests drained since, and not those
//     sent since);
//   - the gateway's requests in flight (routed, not ended) per (slot, adapter): this VM's, counted
//     exactly from its decisions to their ends, and its gateway's other VMs' from their flight
//     sections of the board (gateway-board.ts), as fresh as their last write.
// A place is free only when both say so. So, per slot, in prefill-token equivalents added to the
// routing cost (route-decision.ts), with "others" the distinct other adapters either signal shows:
//   0                 the engine runs the adapter there, or the gateway has requests of it in
//                     flight there and the others leave it a place
//   loadCost          the slot has room for another adapter
//   loadCost × (1 + LAST_PLACE)
//                     … but only one place: other gateways (seen only through the list) may be
//                     taking it at this moment
//   loadCost          the gateway has requests of it in flight there but the others fill every
//                     place (they wait there for one), or the list is truncated and may hold it
//   fullCost          max_loras other adapters are active there
// An adapter with only waiting requests there (in the list, none in flight from this gateway) is
// queued for a place like any other: judged by the places the others take (GAIE's lora-affinity
// scorer likewise ranks "waiting" below "room for another").
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
import { CfgImage, LOAD_ADAPTER_IDS, LoadImage, SlotsImage } from "./cache-images";

/**
 * How far the home order spreads the slots that must load an adapter, in loads: the last slot of
 * the order costs (1 + HOME_SPREAD) × loadCost. Enough to outweigh the queued requests one gateway
 * cannot see of another's between reports (a few), so gateways agree; a slot loaded that much more
 * still loses its turn. 4: measured on the LoRA bench's development seeds (docs/operations.md).
 */
const HOME_SPREAD: f64 = 4;
/**
 * What loading an adapter into a slot's last free place adds, in loads: other gateways' requests
 * of the last few hundred ms are in neither signal, and the last free place is the one they may
 * be taking at this moment. Only the last: pricing every filled place spread adapters over more
 * slots where places are many, for no gain. Measured on the LoRA bench's development seeds
 * (docs/operations.md).
 */
const LAST_PLACE: f64 = 1;
/** (slot, adapter) pairs with requests in flight one VM tracks; beyond, a request is not counted. */
export const OWN_FLIGHTS: i32 = 256;
/** The other VMs' flights one VM reads from the board, all of them together (its arrays grow to it). */
export const SIBLING_FLIGHTS: i32 = 4096;

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
  /** This VM's requests in flight (routed, not ended) per (slot, adapter): the first ownCount. */
  private ownSlot: StaticArray<i32> = new StaticArray<i32>(OWN_FLIGHTS);
  private ownAdapter: StaticArray<i32> = new StaticArray<i32>(OWN_FLIGHTS);
  private ownRequests: StaticArray<u32> = new StaticArray<u32>(OWN_FLIGHTS);
  private ownCount: i32 = 0;
  /** The gateway's other VMs' (slot, adapter) pairs in flight as the last board read showed them. */
  private sibSlot: StaticArray<i32> = new StaticArray<i32>(16);
  private sibAdapter: StaticArray<i32> = new StaticArray<i32>(16);
  private siblingCount: i32 = 0;
  /** Scratch of fill(): the distinct other adapters at one slot (room for every pair above). */
  private seen: StaticArray<i32> = new StaticArray<i32>(OWN_FLIGHTS + 16 + LOAD_ADAPTER_IDS);

  /**
   * This VM sent a request of `adapter` (an id in the pool's table) to `slot`: in flight until
   * ended(). False when the VM already tracks OWN_FLIGHTS pairs (then it is not counted, and its
   * end must not be either).
   */
  started(adapter: i32, slot: i32): bool {
    if (adapter < 0 || slot < 0 || adapter > 0xffff || slot > 0xffff) return false;
    const n = this.ownCount;
    for (let i = 0; i < n; i++) {
      if (this.ownSlot[i] === slot && this.ownAdapter[i] === adapter) {
        this.ownRequests[i]++;
        return true;
      }
    }
    if (n >= OWN_FLIGHTS) return false;
    this.ownSlot[n] = slot;
    this.ownAdapter[n] = adapter;
    this.ownRequests[n] = 1;
    this.ownCount = n + 1;
    return true;
  }

  /** A request started() with (adapter, slot) ended. */
  ended(adapter: i32, slot: i32): void {
    const n = this.ownCount;
    for (let i = 0; i < n; i++) {
      if (this.ownSlot[i] !== slot || this.ownAdapter[i] !== adapter) continue;
      if (--this.ownRequests[i] === 0) {
        // The last pair takes its place: the first ownCount stay dense.
        const last = n - 1;
        this.ownSlot[i] = this.ownSlot[last];
        this.ownAdapter[i] = this.ownAdapter[last];
        this.ownRequests[i] = this.ownRequests[last];
        this.ownCount = last;
      }
      return;
    }
  }

  /** How many (slot, adapter) pairs this VM has in flight: encodeFlights writes as many entries. */
  get flights(): i32 {
    return this.ownCount;
  }

  /** Writes this VM's flights at p, 8 bytes each: slot u16, adapter u16, requests u32 (wire-format §4.5). */
  encodeFlights(p: usize): void {
    for (let i = 0; i < this.ownCount; i++) {
      const e = p + <usize>(i << 3);
      store<u16>(e, <u16>this.ownSlot[i]);
      store<u16>(e, <u16>this.ownAdapter[i], 2);
      store<u32>(e, this.ownRequests[i], 4);
    }
  }

  /** Before a board read: the other VMs' flights are what it brings. */
  clearSiblings(): void {
    this.siblingCount = 0;
  }

  /** Another VM of this gateway has `requests` of `adapter` in flight at `slot` (from the board). */
  addSibling(slot: i32, adapter: i32, requests: u32): void {
    if (requests === 0 || this.siblingCount >= SIBLING_FLIGHTS) return;
    const n = this.siblingCount;
    if (n === this.sibSlot.length) this.growSiblings(n << 1);
    this.sibSlot[n] = slot;
    this.sibAdapter[n] = adapter;
    this.siblingCount = n + 1;
  }

  private growSiblings(cap: i32): void {
    const slot = new StaticArray<i32>(cap);
    const adapter = new StaticArray<i32>(cap);
    for (let i = 0; i < this.siblingCount; i++) {
      slot[i] = this.sibSlot[i];
      adapter[i] = this.sibAdapter[i];
    }
    this.sibSlot = slot;
    this.sibAdapter = adapter;
    this.seen = new StaticArray<i32>(OWN_FLIGHTS + cap + LOAD_ADAPTER_IDS);
  }

  /**
   * Fills cost[s] for every slot of `pool` for a request of adapter `adapter` (an id ≥ 0); false
   * when no slot of the pool reports its adapters (every cost 0: nothing to agree on, the request
   * is routed as any other).
   */
  fill(cfg: CfgImage, slots: SlotsImage, loads: LoadImage, pool: i32, adapter: i32, _nowMs: u64): bool {
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
      this.cost[s] = this.slotCost(cfg, loads, s, adapter, homeOrder(adapter, k++, n));
    }
    return informed;
  }

  private slotCost(cfg: CfgImage, loads: LoadImage, s: i32, adapter: i32, home: f64): f64 {
    const max = loads.maxLoras(s);
    if (max === 0) return 0;
    // The gateway's requests in flight there: the adapter's own, and the distinct others.
    let inFlight = false;
    let others: u32 = 0;
    const seen = this.seen;
    for (let i = 0; i < this.ownCount; i++) {
      if (this.ownSlot[i] !== s) continue;
      const a = this.ownAdapter[i];
      if (a === adapter) inFlight = true;
      else if (!has(seen, others, a)) seen[others++] = a;
    }
    for (let i = 0; i < this.siblingCount; i++) {
      if (this.sibSlot[i] !== s) continue;
      const a = this.sibAdapter[i];
      if (a === adapter) inFlight = true;
      else if (!has(seen, others, a)) seen[others++] = a;
    }
    // The engine's list: the adapter running there, and the others it names that the gateway's
    // requests do not (0xffff: one the table does not have — two of them are two adapters).
    const listed = loads.listedAdapters(s);
    let named: u32 = 0;
    let listedSelf: u32 = 0;
    let running = false;
    for (let i = 0; i < listed; i++) {
      const a = <i32>loads.adapterId(s, i);
      if (a === adapter) {
        listedSelf = 1;
        if (loads.adapterRunning(s, i)) running = true;
        continue;
      }
      named++;
      if (a === 0xffff || !has(seen, others, a)) seen[others++] = a;
    }
    // A truncated list names only some: the unnamed are active too (maybe the adapter itself).
    const active = loads.activeAdapters(s);
    if (active > named + listedSelf) others += active - named - listedSelf;
    if (running) return 0;
    // Loaded (or loading) for this gateway's requests while the others leave it a place; beyond
    // max_loras its requests wait for one there like any other adapter's.
    if (inFlight) return others < max ? 0 : <f64>cfg.loraLoadCost;
    const order = <f64>cfg.loraLoadCost * HOME_SPREAD * home;
    if (others + 1 < max) return <f64>cfg.loraLoadCost + order;
    if (others < max) return <f64>cfg.loraLoadCost * (1 + LAST_PLACE) + order;
    // A truncated list may hold the adapter among the unnamed: no worse than a load.
    if (<u32>listed < active) return <f64>cfg.loraLoadCost + order;
    return <f64>cfg.loraFullCost + order;
  }
}

function has(a: StaticArray<i32>, n: u32, v: i32): bool {
  for (let i: u32 = 0; i < n; i++) if (a[i] === v) return true;
  return false;
}
