// Reads the gateway board `kvr.gwb` (filter/core/gateway-board.ts, docs/wire-format.md §4.5) the
// way an operator's tool would: each VM's section (its unanswered requests per slot), its flight
// section (its LoRA requests in flight per slot and adapter) and the rings' counters. Independent of the filter's code: the layout is the documented one.

/** One VM's published requests at one slot. */
export interface BoardEntry {
  slot: number;
  unanswered: number;
  tokens: number;
  unseen: number;
  decodingUnseen: number;
  /** When the slot started on the unanswered ones: the writer's ms clock mod 2^32. */
  since: number;
}

export interface BoardSection {
  thread: number;
  stamp: bigint;
  entries: BoardEntry[];
}

/** One VM's LoRA requests in flight at one slot, of one adapter (an id in the slot's pool's table). */
export interface BoardFlight {
  slot: number;
  adapter: number;
  requests: number;
}

export interface FlightSection {
  thread: number;
  stamp: bigint;
  flights: BoardFlight[];
}

export interface Board {
  changeSeq: bigint;
  routeSeq: bigint;
  reported: Map<number, number>;
  sections: BoardSection[];
  flightSections: FlightSection[];
}

const FIXED = 40 + 256 * 4 + 128 * 24;

interface SharedDataReader {
  sharedData(key: string): { value: Uint8Array; cas: number } | null;
}

/** The board as the gateway's VMs last wrote it; null before any VM wrote one. */
export function readBoard(host: SharedDataReader): Board | null {
  const v = host.sharedData("kvr.gwb");
  if (v === null) return null;
  const b = Buffer.from(v.value);
  if (b.length < FIXED || b.readUInt32LE(0) !== 0x4247564b || b.readUInt16LE(4) !== 2)
    throw new Error("kvr.gwb is not a version-2 board");
  const reported = new Map<number, number>();
  let at = FIXED;
  for (let i = 0; i < b.readUInt16LE(32); i++, at += 6)
    reported.set(b.readUInt16LE(at), b.readUInt32LE(at + 2));
  const sections: BoardSection[] = [];
  for (let i = 0; i < b.readUInt16LE(34); i++) {
    const count = b.readUInt16LE(at + 2);
    const entries: BoardEntry[] = [];
    for (let e = 0; e < count; e++) {
      const p = at + 16 + e * 22;
      entries.push({
        slot: b.readUInt16LE(p),
        unanswered: b.readUInt32LE(p + 2),
        tokens: b.readUInt32LE(p + 6),
        unseen: b.readUInt32LE(p + 10),
        decodingUnseen: b.readUInt32LE(p + 14),
        since: b.readUInt32LE(p + 18),
      });
    }
    sections.push({ thread: b.readUInt16LE(at), stamp: b.readBigUInt64LE(at + 8), entries });
    at += 16 + count * 22;
  }
  const flightSections: FlightSection[] = [];
  for (let i = 0; i < b.readUInt16LE(36); i++) {
    const count = b.readUInt16LE(at + 2);
    const flights: BoardFlight[] = [];
    for (let e = 0; e < count; e++) {
      const p = at + 16 + e * 8;
      flights.push({
        slot: b.readUInt16LE(p),
        adapter: b.readUInt16LE(p + 2),
        requests: b.readUInt32LE(p + 4),
      });
    }
    flightSections.push({ thread: b.readUInt16LE(at), stamp: b.readBigUInt64LE(at + 8), flights });
    at += 16 + count * 8;
  }
  if (at !== b.length) throw new Error(`kvr.gwb has ${b.length - at} bytes after its sections`);
  return {
    changeSeq: b.readBigUInt64LE(8),
    routeSeq: b.readBigUInt64LE(16),
    reported,
    sections,
    flightSections,
  };
}

/** Every VM's LoRA requests in flight as "slot:adapter" → requests, summed over the VMs. */
export function boardFlights(host: SharedDataReader): Map<string, number> {
  const m = new Map<string, number>();
  for (const s of readBoard(host)?.flightSections ?? [])
    for (const f of s.flights)
      m.set(`${f.slot}:${f.adapter}`, (m.get(`${f.slot}:${f.adapter}`) ?? 0) + f.requests);
  return m;
}

/** Sum of `field` over every VM section's entries (at `slot` when given). */
export function boardSum(host: SharedDataReader, field: keyof BoardEntry, slot?: number): number {
  let n = 0;
  for (const s of readBoard(host)?.sections ?? [])
    for (const e of s.entries) if (slot === undefined || e.slot === slot) n += e[field];
  return n;
}

/** The VM thread slots with a section on the board, sorted. */
export function boardThreads(host: SharedDataReader): number[] {
  return (readBoard(host)?.sections ?? []).map((s) => s.thread).sort((a, b) => a - b);
}

/**
 * Tells the gateway's VMs that the leader rewrote these buckets, as the filter's sync does after
 * applying a page (a change record each, or a jump past the ring when there are more than it
 * holds): for harnesses that write buckets into shared data themselves instead of through a sync.
 */
export function announceBucketChanges(
  host: {
    core: {
      vmId: string;
      sharedData: {
        get(vm: string, k: string): { value: Uint8Array; cas: number } | null;
        set(vm: string, k: string, v: Uint8Array, cas: number): number;
      };
    };
  },
  buckets: number[],
): void {
  if (buckets.length === 0) return;
  const store = host.core.sharedData;
  const cur = store.get(host.core.vmId, "kvr.gwb");
  if (cur === null) return; // no VM has read anything yet
  const b = Buffer.from(cur.value);
  let seq = b.readBigUInt64LE(8);
  if (buckets.length > 256) seq += 257n;
  else
    for (const i of buckets) {
      b.writeUInt32LE(i, 40 + Number(seq % 256n) * 4);
      seq++;
    }
  b.writeBigUInt64LE(seq, 8);
  if (store.set(host.core.vmId, "kvr.gwb", new Uint8Array(b), cur.cas) !== 0)
    throw new Error("kvr.gwb changed while announcing bucket changes");
}
