// One KV event (already msgpack-decoded) → a normalised KvEvent, or a reason to skip it.
// Accepts both encodings vLLM has used: msgspec `array_like` tagged tuples (before vLLM
// PR #42892) and tagged maps with defaults omitted (after), plus SGLang's variants.

import { type BlockRemoved, type BlockStored, type KvEvent, MEDIUM_GPU } from "../vocabulary/kv-events.ts";
import { saltFromExtraKeys } from "./extra-keys.ts";
import { normaliseHash, normaliseHashList } from "./hash.ts";

/** Skipped on purpose: valid input that kvroute does not index. */
export type IgnoreReason = "group_idx" | "spec_kind" | "unknown_type";
/** Dropped because the shape is wrong. */
export type EventError =
  | "event_shape"
  | "block_hashes"
  | "parent_hash"
  | "token_ids"
  | "block_size"
  | "token_count"
  | "field_type";

export type EventResult =
  | { ok: true; event: KvEvent }
  | { ok: false; ignored: IgnoreReason }
  | { ok: false; error: EventError };

/** Attention kinds whose blocks form the prefix cache a request can hit (Dynamo's "main
 * attention" set); sliding-window, Mamba, cross/encoder groups do not. */
const MAIN_ATTENTION_KINDS = new Set(["full_attention", "mla_attention", "sink_full_attention"]);

/** Optional fields common to both encodings, gathered before validation. */
interface RawFields {
  blockHashes: unknown;
  parent: unknown;
  tokenIds: unknown;
  blockSize: unknown;
  loraId: unknown;
  medium: unknown;
  loraName: unknown;
  extraKeys: unknown;
  groupIdx: unknown;
  specKind: unknown;
  slidingWindow: unknown;
  eventVersion: unknown;
  locality: unknown;
  ownership: unknown;
  cacheSalt: unknown;
  sessionId: unknown;
}

const BAD = Symbol("bad");
type Bad = typeof BAD;

function optString(v: unknown): string | null | Bad {
  if (v === undefined || v === null) return null;
  return typeof v === "string" ? v : BAD;
}

function optUint(v: unknown): number | null | Bad {
  if (v === undefined || v === null) return null;
  if (typeof v === "number" && Number.isSafeInteger(v) && v >= 0) return v;
  if (typeof v === "bigint" && v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(v);
  return BAD;
}

function medium(v: unknown): string | Bad {
  const m = optString(v);
  if (m === BAD) return BAD;
  // Dynamo treats "" like an absent medium; so do we.
  return m === null || m === "" ? MEDIUM_GPU : m;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** Filters that apply to store and remove events alike. */
function filterReason(groupIdx: number | null, specKind: string | null): IgnoreReason | null {
  if (groupIdx !== null && groupIdx !== 0) return "group_idx";
  if (specKind !== null && !MAIN_ATTENTION_KINDS.has(specKind)) return "spec_kind";
  return null;
}

function buildStored(f: RawFields): EventResult {
  const hashes = normaliseHashList(f.blockHashes);
  if (hashes === null) return { ok: false, error: "block_hashes" };
  let parent: bigint | null = null;
  if (f.parent !== null && f.parent !== undefined) {
    parent = normaliseHash(f.parent);
    if (parent === null) return { ok: false, error: "parent_hash" };
  }
  const tokenIds = f.tokenIds;
  if (!Array.isArray(tokenIds)) return { ok: false, error: "token_ids" };
  for (let i = 0; i < tokenIds.length; i++) {
    const t = tokenIds[i];
    if (typeof t === "number" && Number.isInteger(t) && t >= 0 && t <= 0xffffffff) continue;
    // A producer that writes every int as uint64 (msgspec does not; Go/Rust encoders may)
    // yields bigints: same values, so take them.
    if (typeof t === "bigint" && t >= 0n && t <= 0xffffffffn) {
      tokenIds[i] = Number(t);
      continue;
    }
    // Token ids are u32 in every engine; anything else (e.g. SGLang EAGLE bigram pairs) is not
    // a token stream kvroute can turn back into bytes.
    return { ok: false, error: "token_ids" };
  }
  const blockSize = optUint(f.blockSize);
  // An offloading connector names the blocks it copied to another medium without their tokens
  // (vLLM: `token_ids=[]`, no parent, `block_size` the block size or 0): a placeholder the index
  // resolves by hash against the blocks it already holds.
  const placeholder = tokenIds.length === 0 && hashes.length > 0;
  if (blockSize === null || blockSize === BAD || (blockSize === 0 && !placeholder))
    return { ok: false, error: "block_size" };
  // The index rebuilds each block's bytes from its tokens, so the counts must agree.
  if (!placeholder && tokenIds.length !== hashes.length * blockSize)
    return { ok: false, error: "token_count" };

  const loraId = optUint(f.loraId);
  const med = medium(f.medium);
  const groupIdx = optUint(f.groupIdx);
  const specKind = optString(f.specKind);
  const slidingWindow = optUint(f.slidingWindow);
  const eventVersion = optUint(f.eventVersion);
  const locality = optString(f.locality);
  const ownership = optString(f.ownership);
  let loraName: string | null | Bad = null;
  let salt = optString(f.cacheSalt);
  const sessionId = optString(f.sessionId);
  if (isPlainObject(f.loraName)) {
    // SGLang's positional form puts a metadata map ({cache_salt}) where vLLM has lora_name.
    salt = salt ?? optString(f.loraName.cache_salt);
  } else {
    loraName = optString(f.loraName);
  }
  const extraKeys = f.extraKeys === undefined || f.extraKeys === null ? null : f.extraKeys;
  if (
    loraId === BAD ||
    med === BAD ||
    groupIdx === BAD ||
    specKind === BAD ||
    slidingWindow === BAD ||
    eventVersion === BAD ||
    locality === BAD ||
    ownership === BAD ||
    salt === BAD ||
    sessionId === BAD ||
    loraName === BAD ||
    (extraKeys !== null && !Array.isArray(extraKeys))
  ) {
    return { ok: false, error: "field_type" };
  }
  const ignored = filterReason(groupIdx, specKind);
  if (ignored !== null) return { ok: false, ignored };
  // SGLang names its salt; vLLM carries it in the first block's extra keys (extra-keys.ts).
  const cacheSalt = salt ?? saltFromExtraKeys(extraKeys as unknown[] | null, parent === null, loraName);
  const event: BlockStored = {
    type: "BlockStored",
    hashes,
    parent,
    tokenIds,
    blockSize,
    loraName,
    loraId,
    medium: med,
    extraKeys: extraKeys as unknown[] | null,
    cacheSalt,
    sessionId,
    groupIdx,
    kvCacheSpecKind: specKind,
    slidingWindow,
    eventVersion,
    locality,
    ownership,
  };
  return { ok: true, event };
}

function buildRemoved(f: RawFields): EventResult {
  const hashes = normaliseHashList(f.blockHashes);
  if (hashes === null) return { ok: false, error: "block_hashes" };
  const med = medium(f.medium);
  const groupIdx = optUint(f.groupIdx);
  const specKind = optString(f.specKind);
  const locality = optString(f.locality);
  const ownership = optString(f.ownership);
  if (med === BAD || groupIdx === BAD || specKind === BAD || locality === BAD || ownership === BAD) {
    return { ok: false, error: "field_type" };
  }
  const ignored = filterReason(groupIdx, specKind);
  if (ignored !== null) return { ok: false, ignored };
  const event: BlockRemoved = { type: "BlockRemoved", hashes, medium: med, groupIdx, locality, ownership };
  return { ok: true, event };
}

const CLEARED: KvEvent = Object.freeze({ type: "AllBlocksCleared" }) as KvEvent;

/**
 * Positional layouts (msgspec array_like, trailing defaults omitted):
 *   BlockStored  [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
 *                 lora_name, extra_keys, group_idx, kv_cache_spec_kind,
 *                 kv_cache_spec_sliding_window, ...]
 *   BlockRemoved [tag, block_hashes, medium, group_idx, ...]
 * Older engines stop early (vLLM ≤0.9 and SGLang end BlockStored at lora_id and BlockRemoved
 * at block_hashes); later positions are ignored so newer producers still decode.
 */
function fromArray(a: unknown[]): EventResult {
  const tag = a[0];
  if (typeof tag !== "string") return { ok: false, error: "event_shape" };
  switch (tag) {
    case "BlockStored":
      if (a.length < 5) return { ok: false, error: "event_shape" };
      return buildStored({
        blockHashes: a[1],
        parent: a[2],
        tokenIds: a[3],
        blockSize: a[4],
        loraId: a[5],
        medium: a[6],
        loraName: a[7],
        extraKeys: a[8],
        groupIdx: a[9],
        specKind: a[10],
        slidingWindow: a[11],
        eventVersion: undefined,
        locality: undefined,
        ownership: undefined,
        cacheSalt: undefined,
        sessionId: undefined,
      });
    case "BlockRemoved":
      if (a.length < 2) return { ok: false, error: "event_shape" };
      return buildRemoved(removedFields(a[1], a[2], a[3], undefined, undefined, undefined));
    case "AllBlocksCleared":
      return { ok: true, event: CLEARED };
    default:
      return { ok: false, ignored: "unknown_type" };
  }
}

function removedFields(
  blockHashes: unknown,
  med: unknown,
  groupIdx: unknown,
  specKind: unknown,
  locality: unknown,
  ownership: unknown,
): RawFields {
  return {
    blockHashes,
    parent: undefined,
    tokenIds: undefined,
    blockSize: undefined,
    loraId: undefined,
    medium: med,
    loraName: undefined,
    extraKeys: undefined,
    groupIdx,
    specKind,
    slidingWindow: undefined,
    eventVersion: undefined,
    locality,
    ownership,
    cacheSalt: undefined,
    sessionId: undefined,
  };
}

/** Tagged map (`type` holds the tag); fields with default values may be absent. */
function fromMap(m: Record<string, unknown>): EventResult {
  const tag = m.type;
  if (typeof tag !== "string") return { ok: false, error: "event_shape" };
  switch (tag) {
    case "BlockStored":
      if (m.block_hashes === undefined || m.token_ids === undefined || m.block_size === undefined) {
        return { ok: false, error: "event_shape" };
      }
      return buildStored({
        blockHashes: m.block_hashes,
        parent: m.parent_block_hash,
        tokenIds: m.token_ids,
        blockSize: m.block_size,
        loraId: m.lora_id,
        medium: m.medium,
        loraName: m.lora_name,
        extraKeys: m.extra_keys,
        groupIdx: m.group_idx,
        specKind: m.kv_cache_spec_kind,
        slidingWindow: m.kv_cache_spec_sliding_window,
        eventVersion: m.event_version,
        locality: m.locality,
        ownership: m.ownership,
        // SGLang has used both a top-level cache_salt and a metadata map.
        cacheSalt: m.cache_salt ?? (isPlainObject(m.metadata) ? m.metadata.cache_salt : undefined),
        sessionId: m.session_id,
      });
    case "BlockRemoved":
      if (m.block_hashes === undefined) return { ok: false, error: "event_shape" };
      return buildRemoved(
        removedFields(m.block_hashes, m.medium, m.group_idx, m.kv_cache_spec_kind, m.locality, m.ownership),
      );
    case "AllBlocksCleared":
      return { ok: true, event: CLEARED };
    default:
      return { ok: false, ignored: "unknown_type" };
  }
}

export function decodeEvent(raw: unknown): EventResult {
  if (Array.isArray(raw)) return fromArray(raw);
  if (isPlainObject(raw)) return fromMap(raw);
  return { ok: false, error: "event_shape" };
}
