// The messages replicas exchange over NATS (docs/wire-format.md §7). A relayed report carries
// the gateway's POST /v1/report body whole, so whatever a report learns to carry travels between
// replicas without a change here; the slot table says which (endpoint, rank) each of the sender's
// slot ids is, since replicas number their slots in the order they discovered them. A message
// larger than the server's max_payload travels as parts (message-parts.ts cuts and joins them).
import { ByteReader } from "../common/byte-reader.ts";
import { ByteWriter } from "../common/byte-writer.ts";

export const RELAYED_REPORT_MAGIC = 0x5852564b; // "KVRX" read as a little-endian u32
export const SLOT_TABLE_MAGIC = 0x5452564b; // "KVRT"
export const MESSAGE_PART_MAGIC = 0x5052564b; // "KVRP"
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
  /**
   * The sender shards pools (`nats.shardPools`): only such replicas are given pools. Carried in
   * the header's flags (formerly reserved, written 0 and never read), so a replica that predates
   * it reads the announcement as before and is taken for one that does not shard.
   */
  shardsPools?: boolean;
}

/** Header flag of a slot-table announcement: the sender shards pools. */
const FLAG_SHARDS_POOLS = 1;

function header(magic: number, replica: string, epoch: bigint, flags = 0): ByteWriter {
  return new ByteWriter().u32(magic).u16(REPLICA_PROTOCOL).u16(flags).str16(replica).u64(epoch);
}

function open(
  bytes: Uint8Array,
  magic: number,
  what: string,
): { r: ByteReader; replica: string; epoch: bigint; flags: number } {
  const r = new ByteReader(bytes, what, (m) => new ReplicaDecodeError(m));
  if (r.u32("magic") !== magic) throw new ReplicaDecodeError(`not a ${what} (bad magic)`);
  const protocol = r.u16("protocol");
  if (protocol !== REPLICA_PROTOCOL) throw new ReplicaDecodeError(`unsupported ${what} protocol ${protocol}`);
  const flags = r.u16("flags");
  const replica = r.str16("replica id");
  return { r, replica, epoch: r.u64("epoch"), flags };
}

export function encodeRelayedReport(m: RelayedReport): Uint8Array {
  return header(RELAYED_REPORT_MAGIC, m.replica, m.epoch).bytes(m.report).finish();
}

export function decodeRelayedReport(bytes: Uint8Array): RelayedReport {
  const { r, replica, epoch } = open(bytes, RELAYED_REPORT_MAGIC, "relayed report");
  return { replica, epoch, report: r.rest() };
}

export function encodeSlotTable(m: SlotTableAnnouncement): Uint8Array {
  const flags = m.shardsPools === true ? FLAG_SHARDS_POOLS : 0;
  const w = header(SLOT_TABLE_MAGIC, m.replica, m.epoch, flags).u32(m.keys.length);
  for (const k of m.keys) w.str16(k);
  return w.finish();
}

export function decodeSlotTable(bytes: Uint8Array): SlotTableAnnouncement {
  const { r, replica, epoch, flags } = open(bytes, SLOT_TABLE_MAGIC, "slot table");
  const keys: string[] = [];
  for (let i = 0, n = r.count("slot count"); i < n; i++) keys.push(r.str16("slot key"));
  r.end();
  return { replica, epoch, keys, shardsPools: (flags & FLAG_SHARDS_POOLS) !== 0 };
}

/** One part of a message too large for one NATS message (any of the messages above, whole). */
export interface MessagePart {
  replica: string;
  epoch: bigint;
  /** Numbers the sender's split messages (wraps at 2^32): the parts of one message share it. */
  messageId: number;
  /** 0 … count − 1; part i holds bytes [i·⌈length/count⌉, …) of the message. */
  index: number;
  count: number;
  /** The whole message's length in bytes. */
  length: number;
  bytes: Uint8Array;
}

/** Bytes a part adds to its share of the message (for a sender's replica id of `replicaIdBytes`). */
export function messagePartOverhead(replicaIdBytes: number): number {
  return 4 + 2 + 2 + 2 + replicaIdBytes + 8 + 4 + 2 + 2 + 4;
}

export function encodeMessagePart(m: MessagePart): Uint8Array {
  return header(MESSAGE_PART_MAGIC, m.replica, m.epoch)
    .u32(m.messageId)
    .u16(m.index)
    .u16(m.count)
    .u32(m.length)
    .bytes(m.bytes)
    .finish();
}

export function decodeMessagePart(bytes: Uint8Array): MessagePart {
  const { r, replica, epoch } = open(bytes, MESSAGE_PART_MAGIC, "message part");
  const messageId = r.u32("message id");
  const index = r.u16("part index");
  const count = r.u16("part count");
  const length = r.u32("message length");
  if (count === 0 || index >= count) throw new ReplicaDecodeError(`part ${index} of ${count}`);
  return { replica, epoch, messageId, index, count, length, bytes: r.rest() };
}

/** Whether a NATS message is a part (the others are whole messages, told apart by their magic). */
export function isMessagePart(bytes: Uint8Array): boolean {
  return (
    bytes.length >= 4 &&
    new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true) === MESSAGE_PART_MAGIC
  );
}

export const RELAYED_EVENTS_MAGIC = 0x4552564b; // "KVRE"

/** What a pool's owner relays of one of its slots' KV-event streams (docs/wire-format.md §7). */
export type RelayedEventsKind = "batch" | "reset";

/**
 * One KV-event batch (the engine's msgpack payload, as it was applied) or one reset of a slot,
 * relayed by the replica that owns the slot's pool (replicas/kv-relay.ts). `seq` numbers the
 * owner's relays per pool from 0 in its epoch: a peer that sees a number skipped lost a relay.
 */
export interface RelayedEvents {
  replica: string;
  epoch: bigint;
  pool: string;
  seq: bigint;
  slotKey: string;
  kind: RelayedEventsKind;
  /** The batch payload; empty for a reset. */
  payload: Uint8Array;
}

export function encodeRelayedEvents(m: RelayedEvents): Uint8Array {
  return header(RELAYED_EVENTS_MAGIC, m.replica, m.epoch)
    .str16(m.pool)
    .u64(m.seq)
    .str16(m.slotKey)
    .u8(m.kind === "batch" ? 0 : 1)
    .bytes(m.payload)
    .finish();
}

export function decodeRelayedEvents(bytes: Uint8Array): RelayedEvents {
  const { r, replica, epoch } = open(bytes, RELAYED_EVENTS_MAGIC, "relayed KV events");
  const pool = r.str16("pool");
  const seq = r.u64("sequence");
  const slotKey = r.str16("slot key");
  const kind = r.u8("kind");
  if (kind > 1) throw new ReplicaDecodeError(`unknown relayed KV events kind ${kind}`);
  return { replica, epoch, pool, seq, slotKey, kind: kind === 0 ? "batch" : "reset", payload: r.rest() };
}
