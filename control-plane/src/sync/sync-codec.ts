// The binary body of GET /v1/sync (docs/wire-format.md §5). Little-endian throughout, because
// the filter reads it in Wasm, which is little-endian.

export const SYNC_MAGIC = 0x5352564b; // "KVRS" read as a little-endian u32
/** 1: every entry is a value. 3: an entry may be a patch of the key's value (the top bit of its
 * length), of bucket images in segment rows; sent only to gateways that ask with `protocol=3`.
 * (2 was the same for bitmap rows: its gateways now get values, never a patch they would misapply.) */
export const SYNC_PROTOCOL = 1;
export const SYNC_PATCH_PROTOCOL = 3;
/** Set in an entry's u32 value length (protocol 3): the entry patches the key's value. */
export const PATCH_LENGTH_BIT = 0x8000_0000;
export const SYNC_HEADER_BYTES = 28;

export const SyncFlags = {
  /** The client's state is from another epoch or ahead of the server: this is a full resend from version 0. */
  reset: 1,
  /** The page stopped early; ask again at once with the returned version. */
  more: 2,
} as const;

export interface SyncPage {
  flags: number;
  epoch: bigint;
  /** The version the client holds after applying this page. */
  version: number;
  entries: Array<{ key: string; value: Uint8Array; patch?: boolean }>;
}

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

/** Writes a page's header at the start of `view`: `count` entries, of which some are patches (`patches`). */
export function writeSyncHeader(
  view: DataView,
  page: Pick<SyncPage, "flags" | "epoch" | "version">,
  count: number,
  patches: boolean,
): void {
  view.setUint32(0, SYNC_MAGIC, true);
  view.setUint16(4, patches ? SYNC_PATCH_PROTOCOL : SYNC_PROTOCOL, true);
  view.setUint16(6, page.flags, true);
  view.setBigUint64(8, page.epoch, true);
  view.setBigUint64(16, BigInt(page.version), true);
  view.setUint32(24, count, true);
}

export function encodeSyncPage(page: SyncPage): Uint8Array {
  const keys = page.entries.map((e) => utf8.encode(e.key));
  let size = SYNC_HEADER_BYTES;
  page.entries.forEach((e, i) => {
    size += 2 + (keys[i] as Uint8Array).length + 4 + e.value.length;
  });
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  writeSyncHeader(
    view,
    page,
    page.entries.length,
    page.entries.some((e) => e.patch === true),
  );
  let at = SYNC_HEADER_BYTES;
  page.entries.forEach((e, i) => {
    const key = keys[i] as Uint8Array;
    if (key.length > 0xffff) throw new Error(`shared-data key too long: ${e.key.slice(0, 40)}…`);
    view.setUint16(at, key.length, true);
    out.set(key, at + 2);
    at += 2 + key.length;
    if (e.value.length >= PATCH_LENGTH_BIT)
      throw new Error(`value of ${e.key} too long: ${e.value.length} bytes`);
    view.setUint32(at, e.patch === true ? (e.value.length | PATCH_LENGTH_BIT) >>> 0 : e.value.length, true);
    out.set(e.value, at + 4);
    at += 4 + e.value.length;
  });
  return out;
}

export class SyncDecodeError extends Error {}

/** Decodes a page (used by tests and by TypeScript consumers; the filter has its own reader in AssemblyScript). */
export function decodeSyncPage(bytes: Uint8Array): SyncPage {
  if (bytes.length < SYNC_HEADER_BYTES)
    throw new SyncDecodeError(`sync page too short: ${bytes.length} bytes`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== SYNC_MAGIC)
    throw new SyncDecodeError("not a kvroute sync page (bad magic)");
  const protocol = view.getUint16(4, true);
  if (protocol !== SYNC_PROTOCOL && protocol !== SYNC_PATCH_PROTOCOL)
    throw new SyncDecodeError(`unsupported sync protocol ${protocol}`);
  const count = view.getUint32(24, true);
  const entries: SyncPage["entries"] = [];
  let at = SYNC_HEADER_BYTES;
  for (let i = 0; i < count; i++) {
    if (at + 2 > bytes.length) throw new SyncDecodeError(`entry ${i}: truncated key length`);
    const keyLen = view.getUint16(at, true);
    if (at + 2 + keyLen + 4 > bytes.length) throw new SyncDecodeError(`entry ${i}: truncated key`);
    const key = utf8Decoder.decode(bytes.subarray(at + 2, at + 2 + keyLen));
    at += 2 + keyLen;
    const word = view.getUint32(at, true);
    const patch = protocol === SYNC_PATCH_PROTOCOL && (word & PATCH_LENGTH_BIT) !== 0;
    const valueLen = patch ? word & ~PATCH_LENGTH_BIT : word;
    if (at + 4 + valueLen > bytes.length) throw new SyncDecodeError(`entry ${i}: truncated value`);
    const value = bytes.subarray(at + 4, at + 4 + valueLen);
    entries.push(patch ? { key, value, patch } : { key, value });
    at += 4 + valueLen;
  }
  if (at !== bytes.length)
    throw new SyncDecodeError(`${bytes.length - at} trailing bytes after ${count} entries`);
  return {
    flags: view.getUint16(6, true),
    epoch: view.getBigUint64(8, true),
    version: Number(view.getBigUint64(16, true)),
    entries,
  };
}
