// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// The ingest fast path: a vLLM KV-event batch payload (MessagePack bytes) walked in the core and
// applied to one slot's BlockTable, so the common batch costs no msgpackr objects, no BigInt and
// no per-event JavaScript (control-plane/src/index/batch-fast-path.ts is its JavaScript face).
//
// Two steps. scan() reads the whole payload and either accepts it — every part in the subset
// below, the batch's ts/rank and per-kind counts written for JavaScript, the events staged as a
// plan (hashes as u64, token ids as u32, exactly the layout BlockTable.store reads) — or refuses
// it, having changed nothing. apply() then runs the plan. JavaScript checks the sequence, the
// clock and the rank between the two, as it does for a decoded batch.
//
// The subset is what vLLM publishes for plain text prompts, in both encodings (docs/kv-events.md):
// batch [ts, events, rank?, ...] or {ts, events, data_parallel_rank}; BlockStored with integer
// hashes, a nil or integer parent, u32 token ids, block_size > 0 and n·block_size tokens, medium
// nil/""/GPU/CPU/STORAGE, lora_id nil or an integer, lora_name and cache_salt nil or well-formed
// UTF-8 strings, metadata nil, extra_keys nil or a list (LoRA names, salts and multimodal keys
// in it, read as control-plane/src/events/extra-keys.ts reads them), group_idx nil or 0, a
// full-attention kind; BlockRemoved likewise; AllBlocksCleared. A LoRA name or a salt changes the
// chain's root hash: the plan carries them and apply hashes the root (wire-format.md §3) from
// the model JavaScript passes. Anything else — SGLang's metadata map, placeholders, hybrid
// groups, bytes hashes, floats where ints go, ext types, duplicate keys, strings that are not
// UTF-8, malformed or trailing bytes — is refused and the JavaScript decoder takes the batch, so
// the index result never depends on which path ran.
import { BlockTable, CallStats, STORE_ORPHAN } from "./block-table";
import { ByteBuf } from "./byte-buf";
import { rootHash } from "./chunk-hash";
import { TokenTable } from "./token-table";
import { utf8SeqLen } from "./utf8";

// Field ids: the positions of vLLM's array-form BlockStored (0..11), then map-only names. The
// map keys (eventKey): type, block_hashes, parent_block_hash, token_ids, block_size, lora_id,
// medium, lora_name, extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window,
// event_version, locality, ownership, cache_salt, metadata, session_id.
const F_TYPE = 0;
const F_HASHES = 1;
const F_PARENT = 2;
const F_TOKENS = 3;
const F_BLOCK_SIZE = 4;
const F_LORA_ID = 5;
const F_MEDIUM = 6;
const F_LORA_NAME = 7;
const F_EXTRA_KEYS = 8;
const F_GROUP = 9;
const F_KIND = 10;
const F_WINDOW = 11;
const F_EVENT_VERSION = 12;
const F_LOCALITY = 13;
const F_OWNERSHIP = 14;
const F_SALT = 15;
const F_METADATA = 16;
const F_SESSION = 17;
const FIELD_COUNT = 18;
/** Kinds whose blocks form the prefix cache (event-decoder.ts MAIN_ATTENTION_KINDS). */
const MAIN_KINDS: string[] = ["full_attention", "mla_attention", "sink_full_attention"];

/** Plan entry kinds. */
const K_STORED: u32 = 1;
const K_REMOVED: u32 = 2;
const K_CLEARED: u32 = 3;
/** Plan entry header: kind, tier, n, blockSize u32; parent u64; hasParent u32; root key u32
 * (a parentless store's LoRA name and salt: 0 none, else 1 + its offset in rootKeys). */
const P_HEADER: usize = 32;
const MAX_DEPTH = 16;

// Results for JavaScript (f64 each): ts, rank (-1: none), stored/removed/cleared events,
// stored blocks on GPU/CPU/STORAGE media, removed blocks; after apply: orphan blocks,
// undetokenizable blocks; then the plan's root keys (apply needs the model's bytes when > 0).
// apply's CallStats counters are at ingestStatsPtr (ingest-io.ts).
const R_TS = 0;
const R_RANK = 1;
const R_STORED_EVENTS = 2;
const R_REMOVED_EVENTS = 3;
const R_CLEARED_EVENTS = 4;
const R_STORED_BY_MEDIUM = 5;
const R_REMOVED_BLOCKS = 8;
const R_ORPHANS = 9;
const R_UNDETOKENIZABLE = 10;
const R_ROOT_KEYS = 11;
const R_COUNT = 12;

const results = heap.alloc(R_COUNT << 3);
const plan = new ByteBuf(4096);
/** The address of each field's value in the payload (0: absent; the payload never lies at 0), by field id. */
const fieldAt = heap.alloc(FIELD_COUNT << 2);
/** An event's hashes (u64) and token ids (u32), read where they lie in the event: one pass over the bytes. */
const stagedHashes = new ByteBuf(256);
const stagedTokens = new ByteBuf(4096);
/** The root keys of the plan's parentless stores: loraLen u32, saltLen u32, then their bytes. */
const rootKeys = new ByteBuf(256);
let hashCount: i64 = -1;
let tokenCount: i64 = -1;

// The reader: the payload lies at [pos, end); `ok` turns false at the first thing refused.
let pos: usize = 0;
let end: usize = 0;
let ok = true;
/** The integer the last readInt read, as a u64 (negatives in two's complement, as hash.ts maps them). */
let intValue: u64 = 0;
let intNegative = false;
let strPtr: usize = 0;
let strLen: i32 = 0;
/** The stored event's LoRA name and salt as readRootKey found them (length -1: none). */
let loraAt: usize = 0;
let loraLen: i32 = -1;
let saltAt: usize = 0;
let saltLen: i32 = -1;

function setResult(i: i32, v: f64): void {
  store<f64>(results + ((<usize>i) << 3), v);
}

function addResult(i: i32, v: f64): void {
  store<f64>(results + ((<usize>i) << 3), load<f64>(results + ((<usize>i) << 3)) + v);
}

/** Skips one value of any type the JavaScript decoder would read without complaint. */
function skip(depth: i32): void {
  if (!Read.need(1) || depth > MAX_DEPTH) {
    ok = false;
    return;
  }
  const b = <u32>load<u8>(pos);
  if (b < 0x80 || b >= 0xe0 || b === 0xc0 || b === 0xc2 || b === 0xc3) {
    pos++;
    return;
  }
  if ((b >= 0xcc && b <= 0xcf) || (b >= 0xd0 && b <= 0xd3)) {
    Read.readInt();
    return;
  }
  if ((b >= 0xa0 && b <= 0xbf) || (b >= 0xd9 && b <= 0xdb)) {
    Read.readStr();
    return;
  }
  if (b === 0xcb) {
    if (Read.need(9)) pos += 9;
    return;
  }
  if (b >= 0xc4 && b <= 0xc6) {
    const w = 1 << (b - 0xc4);
    if (!Read.need(1 + <usize>w)) return;
    pos++;
    const n = Read.be(w);
    if (<u64>(end - pos) < n) ok = false;
    else pos += <usize>n;
    return;
  }
  const arr = Read.readHeader(false);
  if (arr >= 0) {
    for (let i: i64 = 0; i < arr && ok; i++) skip(depth + 1);
    return;
  }
  if (!ok) return;
  const m = Read.readHeader(true);
  if (m >= 0) {
    for (let i: i64 = 0; i < m && ok; i++) {
      // msgpackr turns other keys into strings; leave those to it.
      if (!Read.readStr()) ok = false;
      skip(depth + 1);
    }
    return;
  }
  // float32 (msgpackr may round it), ext types, 0xc1: the JavaScript decoder's business.
  ok = false;
}

/** The map keys by field id (the order of the F_* constants above). */
const KEY_NAMES: string[] = [
  "type",
  "block_hashes",
  "parent_block_hash",
  "token_ids",
  "block_size",
  "lora_id",
  "medium",
  "lora_name",
  "extra_keys",
  "group_idx",
  "kv_cache_spec_kind",
  "kv_cache_spec_sliding_window",
  "event_version",
  "locality",
  "ownership",
  "cache_salt",
  "metadata",
  "session_id",
];
/** Each key's first and last min(len, 8) bytes as little-endian words (4 bytes each below 8):
 * a key compares in two loads instead of a loop over its characters, for the eight or so keys
 * of every map-encoded event. Built once from KEY_NAMES (all ASCII, all ≥ 4 bytes). */
const keyHead = new StaticArray<u64>(FIELD_COUNT);
const keyTail = new StaticArray<u64>(FIELD_COUNT);

function asciiWord(s: string, from: i32, n: i32): u64 {
  let w: u64 = 0;
  for (let i = n - 1; i >= 0; i--) w = (w << 8) | <u64>(s.charCodeAt(from + i) & 0xff);
  return w;
}

for (let f = 0; f < FIELD_COUNT; f++) {
  const name = unchecked(KEY_NAMES[f]);
  const w = name.length >= 8 ? 8 : 4;
  keyHead[f] = asciiWord(name, 0, w);
  keyTail[f] = asciiWord(name, name.length - w, w);
}

/**
 * The reader's small steps, all @inline: they run for every key and value of every event, and a
 * call each (the globals reloaded after it) cost the walk ~13 % — on the ingest bench's
 * payloads, scan alone 8.1–8.5 M → 9.3–10.2 M blocks per CPU-second. Static methods because
 * only those take the decorator in every tool that reads this file; skip() recurses, so it
 * stays a function.
 */
// biome-ignore lint/complexity/noStaticOnlyClass: AssemblyScript's @inline on a top-level function is not TypeScript syntax biome can parse.
class Read {
  @inline static field(f: i32): usize {
    return <usize>load<u32>(fieldAt + ((<usize>f) << 2));
  }

  @inline static setField(f: i32, at: usize): void {
    store<u32>(fieldAt + ((<usize>f) << 2), <u32>at);
  }

  @inline static need(n: usize): bool {
    if (end - pos < n) ok = false;
    return ok;
  }

  /** The big-endian integer of n = 1, 2, 4 or 8 bytes at pos (one load each: a hash is 8 of them). */
  @inline static be(n: i32): u64 {
    let v: u64;
    if (n === 8) v = bswap<u64>(load<u64>(pos));
    else if (n === 4) v = <u64>bswap<u32>(load<u32>(pos));
    else if (n === 2) v = <u64>bswap<u16>(load<u16>(pos));
    else v = <u64>load<u8>(pos);
    pos += <usize>n;
    return v;
  }

  /** Reads an integer of any msgpack width; false (nothing consumed) when the value is not one. */
  @inline static readInt(): bool {
    if (!Read.need(1)) return false;
    const b = <u32>load<u8>(pos);
    if (b < 0x80) {
      pos++;
      intValue = b;
      intNegative = false;
      return true;
    }
    if (b >= 0xe0) {
      pos++;
      intValue = <u64>(<i64>(<i8>b));
      intNegative = true;
      return true;
    }
    if (b >= 0xcc && b <= 0xcf) {
      const w = 1 << (b - 0xcc);
      if (!Read.need(1 + <usize>w)) return false;
      pos++;
      intValue = Read.be(w);
      intNegative = false;
      return true;
    }
    if (b >= 0xd0 && b <= 0xd3) {
      const w = 1 << (b - 0xd0);
      if (!Read.need(1 + <usize>w)) return false;
      pos++;
      const raw = Read.be(w);
      const shift = <u64>(64 - 8 * w);
      const v = <i64>(raw << shift) >> <i64>shift; // sign-extend
      intValue = <u64>v;
      intNegative = v < 0;
      return true;
    }
    return false;
  }

  /** A non-negative integer at most `max`; refuses anything else. */
  @inline static readUint(max: u64): u64 {
    if (!Read.readInt() || intNegative || intValue > max) ok = false;
    return intValue;
  }

  @inline static isNil(): bool {
    return pos < end && load<u8>(pos) === 0xc0;
  }

  /** Consumes a nil; false (nothing consumed) for any other value. */
  @inline static takeNil(): bool {
    if (!Read.isNil()) return false;
    pos++;
    return true;
  }

  @inline static readStr(): bool {
    if (!Read.need(1)) return false;
    const b = <u32>load<u8>(pos);
    let n: u64;
    if (b >= 0xa0 && b <= 0xbf) {
      pos++;
      n = b & 0x1f;
    } else if (b >= 0xd9 && b <= 0xdb) {
      const w = 1 << (b - 0xd9);
      if (!Read.need(1 + <usize>w)) return false;
      pos++;
      n = Read.be(w);
    } else return false;
    if (<u64>(end - pos) < n) {
      ok = false;
      return false;
    }
    strPtr = pos;
    strLen = <i32>n;
    pos += <usize>n;
    return true;
  }

  /** The count of an array (or map, when `map`) header; -1 (nothing consumed) for another value. */
  @inline static readHeader(map: bool): i64 {
    if (!Read.need(1)) return -1;
    const b = <u32>load<u8>(pos);
    const fix: u32 = map ? 0x80 : 0x90;
    const w16: u32 = map ? 0xde : 0xdc;
    let n: u64;
    if (b >= fix && b <= fix + 15) {
      pos++;
      n = b & 15;
    } else if (b === w16 || b === w16 + 1) {
      const w = b === w16 ? 2 : 4;
      if (!Read.need(1 + <usize>w)) return -1;
      pos++;
      n = Read.be(w);
    } else return -1;
    // Every element takes a byte at least: a longer count is a truncated payload.
    if (n > <u64>(end - pos)) {
      ok = false;
      return -1;
    }
    return <i64>n;
  }

  @inline static strIs(s: string): bool {
    const n = s.length;
    if (strLen !== n) return false;
    const chars = changetype<usize>(s);
    for (let i = 0; i < n; i++)
      if (<u32>load<u8>(strPtr + <usize>i) !== <u32>load<u16>(chars + ((<usize>i) << 1))) return false;
    return true;
  }

  /** The last read string is key f (its length already matched by eventKey's switch). */
  @inline static isKey(f: i32): bool {
    const n = strLen;
    if (n >= 8)
      return (
        load<u64>(strPtr) === unchecked(keyHead[f]) &&
        load<u64>(strPtr + <usize>(n - 8)) === unchecked(keyTail[f])
      );
    return (
      <u64>load<u32>(strPtr) === unchecked(keyHead[f]) &&
      <u64>load<u32>(strPtr + <usize>(n - 4)) === unchecked(keyTail[f])
    );
  }

  /** The field id of the last read string as an event map key, or -1: by length and first byte,
   * so a key costs one comparison at most (a map event has eight or so, every event). */
  @inline static eventKey(): i32 {
    if (strLen === 0) return -1;
    const c = <u32>load<u8>(strPtr);
    let f = -1;
    switch (strLen) {
      case 4:
        f = F_TYPE;
        break;
      case 6:
        f = F_MEDIUM;
        break;
      case 7:
        f = F_LORA_ID;
        break;
      case 8:
        f = c === 0x6c ? F_LOCALITY : F_METADATA;
        break;
      case 9:
        f = c === 0x74 ? F_TOKENS : c === 0x6c ? F_LORA_NAME : c === 0x67 ? F_GROUP : F_OWNERSHIP;
        break;
      case 10:
        f = c === 0x62 ? F_BLOCK_SIZE : c === 0x65 ? F_EXTRA_KEYS : c === 0x63 ? F_SALT : F_SESSION;
        break;
      case 12:
        f = F_HASHES;
        break;
      case 13:
        f = F_EVENT_VERSION;
        break;
      case 17:
        f = F_PARENT;
        break;
      case 18:
        f = F_KIND;
        break;
      case 28:
        f = F_WINDOW;
        break;
    }
    return f >= 0 && Read.isKey(f) ? f : -1;
  }

  /** Jumps to field f's value; false when the event lacks it. */
  @inline static at(f: i32): bool {
    const p = Read.field(f);
    if (p === 0) return false;
    pos = p;
    return true;
  }

  /** The field is absent or nil. */
  @inline static nilOrAbsent(f: i32): bool {
    return !Read.at(f) || Read.isNil();
  }
}

/** Index of the last read string in `list`, or -1. */
function strIndex(list: string[]): i32 {
  for (let i = 0; i < list.length; i++) if (Read.strIs(unchecked(list[i]))) return i;
  return -1;
}

/** Absent, nil or a string. */
function optStr(f: i32): bool {
  if (Read.nilOrAbsent(f)) return true;
  return Read.readStr();
}

/** Absent, nil or a non-negative safe integer. */
function optUint(f: i32): bool {
  if (Read.nilOrAbsent(f)) return true;
  Read.readUint(<u64>9007199254740991);
  return ok;
}

/** The media the fast path knows, by tier (tier.ts: "GPU", "CPU", "STORAGE"; "" and nil are the
 * GPU too), as little-endian words: "GPU" and "CPU" whole, "STORAGE" as its first and last 4
 * bytes (mediumTier). */
const MEDIUM_GPU = <u32>asciiWord("GPU", 0, 3);
const MEDIUM_CPU = <u32>asciiWord("CPU", 0, 3);
const MEDIUM_STORAGE_HEAD = <u32>asciiWord("STORAGE", 0, 4);
const MEDIUM_STORAGE_TAIL = <u32>asciiWord("STORAGE", 3, 4);

/**
 * The tier of the medium field, or -1 when the fast path does not know it: found by length and
 * words (strIndex compared each name character by character, every event).
 */
function mediumTier(): i32 {
  if (Read.nilOrAbsent(F_MEDIUM)) return 0;
  if (!Read.readStr()) return -1;
  if (strLen === 0) return 0;
  if (strLen === 3) {
    const w = <u32>load<u16>(strPtr) | ((<u32>load<u8>(strPtr + 2)) << 16);
    return w === MEDIUM_GPU ? 0 : w === MEDIUM_CPU ? 1 : -1;
  }
  if (
    strLen === 7 &&
    load<u32>(strPtr) === MEDIUM_STORAGE_HEAD &&
    load<u32>(strPtr + 3) === MEDIUM_STORAGE_TAIL
  )
    return 2;
  return -1;
}

/** group_idx nil/0 and a full-attention kind (anything the decoder would skip is refused). */
function mainGroup(): bool {
  if (!Read.nilOrAbsent(F_GROUP)) {
    if (Read.readUint(<u64>9007199254740991) !== 0 || !ok) return false;
  }
  if (Read.nilOrAbsent(F_KIND)) return true;
  return Read.readStr() && strIndex(MAIN_KINDS) >= 0;
}

/** The last read string is well-formed UTF-8: then msgpackr's string and the bytes the root
 * hash reads after utf8.encode are these bytes (a malformed one would come back as U+FFFD). */
function wellFormed(): bool {
  const stop = strPtr + <usize>strLen;
  let p = strPtr;
  while (p < stop) {
    if (load<u8>(p) < 0x80) {
      p++;
      continue;
    }
    const n = utf8SeqLen(p, stop);
    if (n === 0) return false;
    p += <usize>n;
  }
  return true;
}

function sameBytes(a: usize, aLen: i32, b: usize, bLen: i32): bool {
  return aLen === bLen && memory.compare(a, b, <usize>aLen) === 0;
}

/** A typed extra key of `n` entries at pos (vLLM PR #55488's form): 1 when it is
 * {type: "cache_salt", salt: <string>} (the salt kept), 0 for any other map, -1 to refuse. */
function typedSalt(n: i64): i32 {
  let typeAt: usize = 0;
  let typeLen: i32 = -1;
  let valueAt: usize = 0;
  let valueLen: i32 = -1;
  let seenType = false;
  let seenSalt = false;
  for (let i: i64 = 0; i < n; i++) {
    if (!Read.readStr() || Read.strIs("__proto__")) return -1;
    const isType = Read.strIs("type");
    const isSalt = !isType && Read.strIs("salt");
    // msgpackr keeps a repeated key's last value: the decoder's business.
    if ((isType && seenType) || (isSalt && seenSalt)) return -1;
    seenType = seenType || isType;
    seenSalt = seenSalt || isSalt;
    if ((isType || isSalt) && Read.readStr()) {
      if (isType) {
        typeAt = strPtr;
        typeLen = strLen;
      } else {
        valueAt = strPtr;
        valueLen = strLen;
      }
      continue;
    }
    if (!ok) return -1;
    skip(3);
    if (!ok) return -1;
  }
  if (typeLen < 0 || valueLen < 0) return 0;
  strPtr = typeAt;
  strLen = typeLen;
  if (!Read.strIs("cache_salt")) return 0;
  strPtr = valueAt;
  strLen = valueLen;
  if (!wellFormed()) return -1;
  saltAt = valueAt;
  saltLen = valueLen;
  return 1;
}

/**
 * The salt in the first block's extra keys at pos, as saltFromExtraKeys
 * (control-plane/src/events/extra-keys.ts) finds it: a typed cache_salt entry, else the last
 * string of the tuple that is not its leading LoRA name; a tuple that is not a list has none.
 * False to refuse.
 */
function firstBlockSalt(): bool {
  const n = Read.readHeader(false);
  if (n < 0) return ok;
  let lastAt: usize = 0;
  let lastLen: i32 = -1;
  for (let i: i64 = 0; i < n; i++) {
    if (Read.readStr()) {
      if (!wellFormed()) return false;
      if (i === 0 && loraLen >= 0 && sameBytes(strPtr, strLen, loraAt, loraLen)) continue;
      lastAt = strPtr;
      lastLen = strLen;
      continue;
    }
    if (!ok) return false;
    const m = Read.readHeader(true);
    if (m >= 0) {
      const typed = typedSalt(m);
      if (typed !== 0) return typed > 0;
      continue;
    }
    if (!ok) return false;
    skip(2); // multimodal [identifier, offset] pairs, an older engine's int LoRA id, bytes
    if (!ok) return false;
  }
  if (lastLen >= 0) {
    saltAt = lastAt;
    saltLen = lastLen;
  }
  return true;
}

/**
 * A stored event's lora_id, lora_name, metadata, cache_salt and extra_keys, with the decoder's
 * type rules (event-decoder.ts buildStored); the LoRA name and the salt that seed a parentless
 * chain's root are left in loraAt/loraLen and saltAt/saltLen. False to refuse.
 */
function readRootKey(parentless: bool): bool {
  loraLen = -1;
  saltLen = -1;
  if (!optUint(F_LORA_ID)) return false; // deprecated, and not part of the hash
  if (!Read.nilOrAbsent(F_LORA_NAME)) {
    // SGLang's metadata map in this position is the decoder's business.
    if (!Read.readStr() || !wellFormed()) return false;
    loraAt = strPtr;
    loraLen = strLen;
  }
  if (!Read.nilOrAbsent(F_METADATA)) return false;
  if (!Read.nilOrAbsent(F_SALT)) {
    if (!Read.readStr() || !wellFormed()) return false;
    saltAt = strPtr;
    saltLen = strLen;
  }
  if (Read.nilOrAbsent(F_EXTRA_KEYS)) return true;
  const keys = Read.readHeader(false);
  if (keys < 0) return false;
  // Only a sequence's first run carries the salt, and a named cache_salt comes first. The other
  // tuples need no reading: skip() validated them when the fields were read.
  if (keys === 0 || !parentless || saltLen >= 0) return true;
  return firstBlockSalt();
}

/** Stages the root key readRootKey left: 0 when the chain has the plain root ("" is no name). */
function stageRootKey(): u32 {
  const lora = loraLen > 0 ? loraLen : 0;
  const salt = saltLen > 0 ? saltLen : 0;
  if (lora === 0 && salt === 0) return 0;
  const at = rootKeys.len;
  rootKeys.reserve(8 + lora + salt);
  store<u32>(rootKeys.ptr + <usize>at, <u32>lora);
  store<u32>(rootKeys.ptr + <usize>at + 4, <u32>salt);
  rootKeys.len += 8;
  rootKeys.append(loraAt, lora);
  rootKeys.append(saltAt, salt);
  addResult(R_ROOT_KEYS, 1);
  return <u32>at + 1;
}

/** Reads the array of integer hashes at pos into stagedHashes; false to refuse. The loops below
 * keep the read position in a local, not the global `pos`: a global lives in memory, and loading
 * and storing it for every value made these loops the largest part of the walk (issue 31). */
function stageHashes(): bool {
  const n = Read.readHeader(false);
  if (n <= 0) return false; // empty stores are placeholders-in-waiting: the decoder's business
  stagedHashes.len = 0;
  stagedHashes.reserve(<i32>(n << 3));
  const dst = stagedHashes.ptr;
  const stop = end;
  let p = pos;
  for (let i: i32 = 0; i < <i32>n; i++) {
    // Inline the common case: a uint64 (vLLM's hashes are 64-bit).
    if (stop - p >= 9 && load<u8>(p) === 0xcf) {
      store<u64>(dst + ((<usize>i) << 3), bswap<u64>(load<u64>(p + 1)));
      p += 9;
      continue;
    }
    pos = p;
    if (!Read.readInt()) return false;
    p = pos;
    store<u64>(dst + ((<usize>i) << 3), intValue);
  }
  pos = p;
  hashCount = n;
  return true;
}

/** Reads the array of u32 token ids at pos into stagedTokens; false to refuse. */
function stageTokens(): bool {
  const n = Read.readHeader(false);
  if (n < 0) return false;
  stagedTokens.len = 0;
  stagedTokens.reserve(<i32>(n << 2));
  const dst = stagedTokens.ptr;
  const stop = end;
  let p = pos;
  for (let i: i32 = 0; i < <i32>n; i++) {
    // Inline the common cases: a token id below 128, a uint16 or a uint32 (msgspec's forms).
    if (p >= stop) {
      ok = false;
      return false;
    }
    const b = <u32>load<u8>(p);
    let id: u32;
    if (b < 0x80) {
      p++;
      id = b;
    } else if (b === 0xcd && stop - p >= 3) {
      id = <u32>bswap<u16>(load<u16>(p + 1));
      p += 3;
    } else if (b === 0xce && stop - p >= 5) {
      id = bswap<u32>(load<u32>(p + 1));
      p += 5;
    } else {
      pos = p;
      id = <u32>Read.readUint(0xffffffff);
      if (!ok) return false;
      p = pos;
    }
    store<u32>(dst + ((<usize>i) << 2), id);
  }
  pos = p;
  tokenCount = n;
  return ok;
}

/** Reads field f's value at pos: the hashes and token ids are staged, the rest skipped for now. */
function readField(f: i32): bool {
  if (f >= 0) Read.setField(f, pos);
  if (f === F_HASHES) return stageHashes();
  if (f === F_TOKENS) return stageTokens();
  // A one-byte value (nil, a bool, a fixint: most of an event's other fields) without a call:
  // skip() recurses, so it is never inlined. Its first case, as it reads it.
  if (pos < end) {
    const b = <u32>load<u8>(pos);
    if (b < 0x80 || b >= 0xe0 || b === 0xc0 || b === 0xc2 || b === 0xc3) {
      pos++;
      return ok;
    }
  }
  skip(1);
  return ok;
}

/** Reads an event's fields into fieldAt (array form when `arrayLen` ≥ 0); false to refuse. */
function readFields(arrayLen: i64, mapLen: i64): bool {
  for (let f = 0; f < FIELD_COUNT; f++) Read.setField(f, 0);
  hashCount = -1;
  tokenCount = -1;
  if (arrayLen >= 0) {
    // The tag first tells which positional layout the rest has.
    const tagAt = pos;
    if (arrayLen === 0 || !Read.readStr()) return false;
    const removed = Read.strIs("BlockRemoved");
    Read.setField(F_TYPE, tagAt);
    for (let i: i64 = 1; i < arrayLen && ok; i++) {
      let f: i32 = -1;
      if (removed) f = i === 1 ? F_HASHES : i === 2 ? F_MEDIUM : i === 3 ? F_GROUP : -1;
      else if (i <= F_WINDOW) f = <i32>i;
      if (!readField(f)) return false;
    }
    return ok;
  }
  for (let i: i64 = 0; i < mapLen && ok; i++) {
    if (!Read.readStr()) return false;
    const f = Read.eventKey();
    if (f >= 0 && Read.field(f) !== 0) return false; // a repeated key: msgpackr keeps the last
    if (f < 0 && Read.strIs("__proto__")) return false;
    if (!readField(f)) return false;
  }
  return ok;
}

/** Validates one event and appends its plan entry; false to refuse the batch. */
function scanEvent(arrayLen: i64, mapLen: i64): bool {
  if (!readFields(arrayLen, mapLen)) return false;
  const after = pos;
  if (!Read.at(F_TYPE) || !Read.readStr()) return false;
  const isArray = arrayLen >= 0;
  const entry = plan.len;
  if (Read.strIs("AllBlocksCleared")) {
    plan.reserve(<i32>P_HEADER);
    store<u32>(plan.ptr + <usize>entry, K_CLEARED);
    plan.len += <i32>P_HEADER;
    addResult(R_CLEARED_EVENTS, 1);
    pos = after;
    return true;
  }
  const stored = Read.strIs("BlockStored");
  if (!stored && !Read.strIs("BlockRemoved")) return false;
  // The decoder's shape rules: array BlockStored has ≥ 5 elements; map events need their keys.
  if (stored && isArray && arrayLen < 5) return false;
  if (
    Read.field(F_HASHES) === 0 ||
    (stored && (Read.field(F_TOKENS) === 0 || Read.field(F_BLOCK_SIZE) === 0))
  )
    return false;
  const n = hashCount;
  if (n < 0 || !ok) return false;
  plan.reserve(<i32>(P_HEADER + (n << 3)));
  ByteBuf.copyShort(plan.ptr + <usize>entry + P_HEADER, stagedHashes.ptr, <usize>(n << 3));
  plan.len += <i32>(P_HEADER + (n << 3));
  const tier = mediumTier();
  if (tier < 0 || !mainGroup()) return false;
  if (!optStr(F_LOCALITY) || !optStr(F_OWNERSHIP)) return false;
  let blockSize: u64 = 0;
  let hasParent: u32 = 0;
  let parent: u64 = 0;
  if (stored) {
    if (!Read.nilOrAbsent(F_PARENT)) {
      if (!Read.readInt()) return false;
      hasParent = 1;
      parent = intValue;
    }
    Read.at(F_BLOCK_SIZE);
    blockSize = Read.readUint(0xffff);
    if (!ok || blockSize === 0) return false;
    const count = tokenCount;
    if (count < 0 || <u64>count !== <u64>n * blockSize) return false;
    plan.reserve(<i32>((count << 2) + 8));
    ByteBuf.copyShort(plan.ptr + <usize>plan.len, stagedTokens.ptr, <usize>(count << 2));
    plan.len += <i32>(count << 2);
    plan.len = (plan.len + 7) & ~7; // the next entry's hashes stay 8-aligned
    if (!readRootKey(hasParent === 0)) return false;
    if (!optUint(F_WINDOW) || !optUint(F_EVENT_VERSION) || !optStr(F_SESSION)) return false;
    addResult(R_STORED_EVENTS, 1);
    addResult(R_STORED_BY_MEDIUM + tier, <f64>n);
  } else {
    addResult(R_REMOVED_EVENTS, 1);
    addResult(R_REMOVED_BLOCKS, <f64>n);
  }
  const h = plan.ptr + <usize>entry;
  store<u32>(h, stored ? K_STORED : K_REMOVED);
  store<u32>(h + 4, <u32>tier);
  store<u32>(h + 8, <u32>n);
  store<u32>(h + 12, <u32>blockSize);
  store<u64>(h + 16, parent);
  store<u32>(h + 24, hasParent);
  store<u32>(h + 28, stored && hasParent === 0 ? stageRootKey() : 0);
  pos = after;
  return ok;
}

function scanEvents(): bool {
  const n = Read.readHeader(false);
  if (n < 0) return false;
  for (let i: i64 = 0; i < n; i++) {
    if (!Read.need(1)) return false;
    const arr = Read.readHeader(false);
    if (!ok) return false;
    const m = arr < 0 ? Read.readHeader(true) : -1;
    if (!ok || (arr < 0 && m < 0)) return false;
    if (!scanEvent(arr, m)) return false;
  }
  return ok;
}

/** The batch's ts: a float64 or an integer (what the decoder's asNumber takes, float32 aside). */
function readTs(): bool {
  if (!Read.need(1)) return false;
  if (load<u8>(pos) === 0xcb) {
    if (!Read.need(9)) return false;
    pos++;
    const v = reinterpret<f64>(Read.be(8));
    if (v - v !== 0) return false; // NaN or ±Infinity: the decoder refuses them
    setResult(R_TS, v);
    return true;
  }
  if (!Read.readInt()) return false;
  setResult(R_TS, intNegative ? <f64>(<i64>intValue) : <f64>intValue);
  return true;
}

/** The batch's rank: nil, or what asRank accepts (a fixint..uint32, a uint64 below 2^31). */
function readRank(): bool {
  if (Read.takeNil()) return true;
  if (!Read.need(1)) return false;
  const wide = load<u8>(pos) === 0xcf || load<u8>(pos) === 0xd3;
  if (!Read.readInt() || intNegative) return false;
  if (wide ? intValue >= 1 << 31 : intValue > 9007199254740991) return false;
  setResult(R_RANK, <f64>intValue);
  return true;
}

/**
 * Walks the payload at [ptr, ptr + len): 1 when the fast path takes the batch (its plan staged,
 * the results written), 0 when the JavaScript decoder must.
 */
export function scanBatch(ptr: usize, len: i32): i32 {
  pos = ptr;
  end = ptr + <usize>len;
  ok = true;
  plan.len = 0;
  rootKeys.len = 0;
  for (let i = 0; i < R_COUNT; i++) setResult(i, 0);
  setResult(R_RANK, -1);
  const arr = Read.readHeader(false);
  if (!ok) return 0;
  if (arr >= 0) {
    if (arr < 2 || !readTs() || !scanEvents()) return 0;
    if (arr >= 3 && !readRank()) return 0;
    for (let i: i64 = 3; i < arr && ok; i++) skip(1);
    return ok && pos === end ? 1 : 0;
  }
  const m = Read.readHeader(true);
  if (m < 0) return 0;
  let tsAt: i64 = -1;
  let eventsAt: i64 = -1;
  let rankAt: i64 = -1;
  for (let i: i64 = 0; i < m && ok; i++) {
    if (!Read.readStr()) return 0;
    let slot: i32 = -1;
    if (Read.strIs("ts")) slot = 0;
    else if (Read.strIs("events")) slot = 1;
    else if (Read.strIs("data_parallel_rank")) slot = 2;
    // Rank aliases (nil falls through to the next) and prototype keys: the decoder's rules.
    else if (Read.strIs("attn_dp_rank") || Read.strIs("dp_rank") || Read.strIs("__proto__")) return 0;
    const here = <i64>pos;
    if (slot === 0) {
      if (tsAt >= 0) return 0;
      tsAt = here;
    } else if (slot === 1) {
      if (eventsAt >= 0) return 0;
      eventsAt = here;
    } else if (slot === 2) {
      if (rankAt >= 0) return 0;
      rankAt = here;
    }
    skip(1);
  }
  if (!ok || pos !== end || tsAt < 0 || eventsAt < 0) return 0;
  pos = <usize>tsAt;
  if (!readTs()) return 0;
  if (rankAt >= 0) {
    pos = <usize>rankAt;
    if (!readRank()) return 0;
  }
  // The map's one extra pass (the events were skipped to find every key) is the rare revision.
  pos = <usize>eventsAt;
  return scanEvents() ? 1 : 0;
}

/** Where touchPlan's loads go (exported, so the optimizer keeps them). */
export let planSink: u32 = 0;

/**
 * Touches the block map slot of every hash the plan looks up, and the memory the stored blocks'
 * records will take, before applying it: those loads do not depend on each other, so their
 * cache misses overlap here, where inside store each would stall on its own (the new blocks of
 * a batch all miss the map: issue 31).
 */
function touchPlan(table: BlockTable): void {
  const map = table.map;
  let sink: u32 = 0;
  let stored = 0;
  let e = plan.ptr;
  const stop = plan.ptr + <usize>plan.len;
  while (e < stop) {
    const kind = load<u32>(e);
    if (kind === K_CLEARED) {
      e += P_HEADER;
      continue;
    }
    const n = <i32>load<u32>(e + 8);
    const hashes = e + P_HEADER;
    if (kind === K_STORED) {
      stored += n;
      if (load<u32>(e + 24) !== 0) sink ^= map.touch(load<u64>(e + 16));
    }
    for (let i = 0; i < n; i++) sink ^= map.touch(load<u64>(hashes + ((<usize>i) << 3)));
    let next = hashes + ((<usize>n) << 3);
    if (kind === K_STORED) next += (((<usize>(n * <i32>load<u32>(e + 12))) << 2) + 7) & ~(<usize>7);
    e = next;
  }
  // And the memory their records go to (a new record is written where nothing is cached).
  sink ^= table.touchRecords(stored);
  planSink ^= sink;
}

/**
 * Runs the plan of the last accepted scan on `table`; counters accumulate in `stats` and the
 * results. `root` is the slot's plain h0; the model's bytes at [model, model + modelLen) seed
 * the roots of LoRA and salted chains (needed when the scan staged root keys).
 */
export function applyBatch(
  table: BlockTable,
  tokens: TokenTable,
  root: u64,
  model: usize,
  modelLen: i32,
  nowMs: f64,
  scratch: ByteBuf,
  hashOut: ByteBuf,
  stats: CallStats,
): void {
  touchPlan(table);
  let p = plan.ptr;
  const stop = plan.ptr + <usize>plan.len;
  while (p < stop) {
    const kind = load<u32>(p);
    const tier = load<u32>(p + 4);
    const n = <i32>load<u32>(p + 8);
    const blockSize = <i32>load<u32>(p + 12);
    const hashes = p + P_HEADER;
    if (kind === K_CLEARED) {
      table.clear(true);
      p += P_HEADER;
      continue;
    }
    if (kind === K_REMOVED) {
      table.remove(hashes, n, tier, stats);
      p = hashes + ((<usize>n) << 3);
      continue;
    }
    const hasParent = load<u32>(p + 24) !== 0;
    const key = load<u32>(p + 28);
    let h0: u64 = hasParent ? 0 : root;
    if (key !== 0) {
      const k = rootKeys.ptr + <usize>(key - 1);
      const loraBytes = <i32>load<u32>(k);
      const lora = k + 8;
      h0 = rootHash(
        model,
        modelLen,
        lora,
        loraBytes,
        lora + <usize>loraBytes,
        <i32>load<u32>(k + 4),
        scratch,
      );
    }
    const r = table.store(
      hashes,
      n,
      tokens,
      blockSize,
      tier,
      hasParent,
      load<u64>(p + 16),
      h0,
      nowMs,
      scratch,
      hashOut,
      stats,
    );
    if (r === STORE_ORPHAN) addResult(R_ORPHANS, <f64>n);
    else addResult(R_UNDETOKENIZABLE, <f64>r);
    p = hashes + ((<usize>n) << 3) + ((((<usize>(n * blockSize)) << 2) + 7) & ~(<usize>7));
  }
}

export function batchResultsPtr(): usize {
  return results;
}
