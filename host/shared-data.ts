// Envoy's shared data (proxy-wasm-cpp-host src/shared_data.cc, used unchanged by Envoy through
// ContextBase::getSharedData/setSharedData): one process-wide store, one map per vm_id, one
// global CAS counter that starts at 1 and skips 0. Every successful set gets a fresh cas; a set
// with cas 0 is unconditional; a non-zero cas that differs from the stored one → CasMismatch.
// A missing key (or vm_id) → NotFound. The ABI has no delete, so neither does this store.
import { WasmResult } from "./abi/constants.ts";

export interface SharedValue {
  value: Uint8Array;
  cas: number;
}

/** The store as it was at one moment (a value in a snapshot is never changed in place, see Stored). */
export type SharedDataSnapshot = Map<string, Map<string, SharedValue>>;

/**
 * A stored value: its bytes sit in `room`, reused by the next set of the same key when they fit and
 * no snapshot holds this record (Envoy overwrites a key's string in place; a fresh buffer per set
 * would make every write cost an allocation here that Envoy never pays).
 */
interface Stored extends SharedValue {
  room: Uint8Array;
  /** The store's snapshot count when this record was made: snapshots taken since hold it. */
  madeAt: number;
}

export class SharedDataStore {
  private readonly maps = new Map<string, Map<string, Stored>>();
  private snapshots = 0;
  /** While set, get() answers from this snapshot instead of the live store (see readFrom). */
  private readView: SharedDataSnapshot | null = null;
  private nextCasValue = 1;
  /** Called after every successful get; the host uses it as a preemption point (see scheduler.ts). */
  onGet: ((vmId: string, key: string) => void) | null = null;

  private nextCas(): number {
    const cas = this.nextCasValue;
    this.nextCasValue = (this.nextCasValue + 1) >>> 0;
    if (this.nextCasValue === 0) this.nextCasValue = 1;
    return cas;
  }

  snapshot(): SharedDataSnapshot {
    this.snapshots++;
    const s: SharedDataSnapshot = new Map();
    for (const [vmId, map] of this.maps) s.set(vmId, new Map(map));
    return s;
  }

  /**
   * Serves get() from `snapshot` until the next set() (or until called with null). The host uses
   * it to run several threads' ticks as if in parallel: each tick reads the store as it was before
   * any of them wrote, up to its own first write — a schedule Envoy's threads can really take.
   */
  readFrom(snapshot: SharedDataSnapshot | null): void {
    this.readView = snapshot;
  }

  /**
   * Runs `bodies` one at a time as if they ran at once on Envoy's parallel threads: each reads
   * the store as it was before any of them wrote, up to its own first set (from then on it sees
   * the live store). That is a schedule Envoy's threads can really take — each runs to its first
   * write, then each finishes in turn: get, get, …, set, set — and the worst one for
   * read-then-write protocols. Host.tick({ interleaved }) runs ticks this way; startInParallel
   * (thread.ts) the start-up of VMs, as Envoy's workers configure theirs when a plugin loads.
   */
  asIfParallel(bodies: ReadonlyArray<() => void>): void {
    const snapshot = this.snapshot();
    try {
      for (const body of bodies) {
        this.readFrom(snapshot);
        body();
      }
    } finally {
      this.readFrom(null);
    }
  }

  /**
   * The value and its cas. A copy unless `copy` is false: the ABI copies the bytes into the VM
   * itself (as Envoy does), and a second copy would make every read cost a buffer allocation in
   * this host that Envoy never pays. The store never changes a value in place, so an uncopied one
   * stays valid; its reader must not modify it.
   */
  get(vmId: string, key: string, copy = true): SharedValue | null {
    const v = (this.readView ?? this.maps).get(vmId)?.get(key) ?? null;
    if (v === null) return null;
    return copy ? { value: v.value.slice(), cas: v.cas } : v;
  }

  /** Returns a WasmResult code: Ok or CasMismatch. `value` is copied (it may be a view of VM memory). */
  set(vmId: string, key: string, value: Uint8Array, cas: number): number {
    this.readView = null;
    let map = this.maps.get(vmId);
    if (map === undefined) {
      map = new Map();
      this.maps.set(vmId, map);
    }
    const cur = map.get(key);
    if (cur !== undefined && cas !== 0 && cas !== cur.cas) return WasmResult.CasMismatch;
    if (cur !== undefined && cur.madeAt === this.snapshots && cur.room.length >= value.length) {
      cur.room.set(value);
      cur.value = cur.room.subarray(0, value.length);
      cur.cas = this.nextCas();
      return WasmResult.Ok;
    }
    // Room to grow: values such as a bucket or the gateway board change size a little per write.
    const room = new Uint8Array(value.length + (value.length >> 2) + 16);
    room.set(value);
    map.set(key, {
      value: room.subarray(0, value.length),
      cas: this.nextCas(),
      room,
      madeAt: this.snapshots,
    });
    return WasmResult.Ok;
  }

  keys(vmId: string): string[] {
    return [...(this.maps.get(vmId)?.keys() ?? [])];
  }

  /** Test/operator view: total bytes held for a vm_id (keys + values), the budget DESIGN §3 bounds. */
  bytes(vmId: string): number {
    let n = 0;
    for (const [k, v] of this.maps.get(vmId) ?? []) n += Buffer.byteLength(k) + v.value.length;
    return n;
  }
}
