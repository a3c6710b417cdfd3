// The two messages replicas exchange over NATS (docs/wire-format.md §7). A relayed report carries
// the gateway's POST /v1/report body whole, so whatever a report learns to carry travels between
// replicas without a change here; the slot table says which (endpoint, rank) each of the sender's
// slot ids is, since replicas number their slots in the order they discovered them.
import { ByteReader } from "../common/byte-reader.ts";
import { ByteWriter } from "../common/byte-writer.ts";

export const RELAYED_REPORT_MAGIC = 0x5852564b; // "KVRX" read as a little-endian u32
export const SLOT_TABLE_MAGIC = 0x5452564b; // "KVRT"
export const REPLICA_PROTOCOL = 1;

export class ReplicaDecodeError extends Error {}

/** A gateway's report as one replica accepted it, for the others. */
export interface RelayedReport {
  replica: string;
  /** The sender's epoch: its slot ids mean something only together with it. */
  epoch: bigint;
  /** The report body exactly as the gateway sent it (wire-format §6). */
  report: Uint8Array;
}

/** A replica's slot table: slot id i is `keys[i]` (`<pool>/<address>#<rank>`). */
export interface SlotTableAnnouncement {
  replica: string;
  epoch: bigint;
  keys: string[];
}

function header(magic: number, replica: string, epoch: bigint): ByteWriter {
  return new ByteWriter().u32(magic).u16(REPLICA_PROTOCOL).u16(0).str16(replica).u64(epoch);
}

function open(
  bytes: Uint8Array,
  magic: number,
  what: string,
): { r: ByteReader; replica: string; epoch: bigint } {
  const r = new ByteReader(bytes, what, (m) => new ReplicaDecodeError(m));
  if (r.u32("magic") !== magic) throw new ReplicaDecodeError(`not a ${what} (bad magic)`);
  const protocol = r.u16("protocol");
  if (protocol !== REPLICA_PROTOCOL) throw new ReplicaDecodeError(`unsupported ${what} protocol ${protocol}`);
  r.u16("reserved");
  const replica = r.str16("replica id");
  return { r, replica, epoch: r.u64("epoch") };
}

export function encodeRelayedReport(m: RelayedReport): Uint8Array {
  return header(RELAYED_REPORT_MAGIC, m.replica, m.epoch).bytes(m.report).finish();
}

export function decodeRelayedReport(bytes: Uint8Array): RelayedReport {
  const { r, replica, epoch } = open(bytes, RELAYED_REPORT_MAGIC, "relayed report");
  return { replica, epoch, report: r.rest() };
}

export function encodeSlotTable(m: SlotTableAnnouncement): Uint8Array {
  const w = header(SLOT_TABLE_MAGIC, m.replica, m.epoch).u32(m.keys.length);
  for (const k of m.keys) w.str16(k);
  return w.finish();
}

export function decodeSlotTable(bytes: Uint8Array): SlotTableAnnouncement {
  const { r, replica, epoch } = open(bytes, SLOT_TABLE_MAGIC, "slot table");
  const keys: string[] = [];
  for (let i = 0, n = r.count("slot count"); i < n; i++) keys.push(r.str16("slot key"));
  r.end();
  return { replica, epoch, keys };
}
