// vLLM's KV-cache event types and their msgpack wire encoding (one file per wire format).
// Batch: positional `[ts, events, data_parallel_rank]` (msgspec `array_like`). Events: either
// tagged arrays `["BlockStored", ...fields in declaration order]` (vLLM before v0.26) or tagged
// maps `{"type": "BlockStored", ...}` (v0.26+). msgspec's `omit_defaults` drops fields that
// have defaults and hold them: trailing ones in the array form, any of them in the map form.
// Fields without defaults (e.g. `lora_id`, `medium`, `lora_name`) are always written.
import type { BlockHash } from "./block-hash.ts";
import { Float64, type Packable, packMsgspec } from "./msgpack.ts";

export const MEDIUM_GPU = "GPU";

export interface BlockStored {
  type: "BlockStored";
  blockHashes: BlockHash[];
  parentBlockHash: BlockHash | null;
  tokenIds: number[];
  blockSize: number;
  loraName: string | null;
  /** Deprecated in vLLM in favour of loraName, still published. */
  loraId?: number | null;
  /** One entry per block: the extra keys mixed into its hash, or null. Null when no block has any. */
  extraKeys: (string[] | null)[] | null;
}

export interface BlockRemoved {
  type: "BlockRemoved";
  blockHashes: BlockHash[];
}

export interface AllBlocksCleared {
  type: "AllBlocksCleared";
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;

export type EventEncoding = "array" | "map";

/**
 * Newer vLLM (the map-encoding generation) publishes extra keys as typed, tagged structs —
 * `{"type": "lora", "name": ...}`, `{"type": "cache_salt", "salt": ...}` — classified by
 * comparing each raw key with the request's LoRA name; older vLLM sends the raw values.
 */
function extraKeysField(e: BlockStored, encoding: EventEncoding): Packable {
  if (e.extraKeys === null || encoding === "array") return e.extraKeys;
  return e.extraKeys.map((block) =>
    block === null
      ? null
      : block.map(
          (k): Packable => (k === e.loraName ? { type: "lora", name: k } : { type: "cache_salt", salt: k }),
        ),
  );
}

function storedFields(e: BlockStored, encoding: EventEncoding): Array<[string, Packable, boolean]> {
  // [name, value, hasDefault]; order = vLLM's field declaration order.
  return [
    ["block_hashes", e.blockHashes, false],
    ["parent_block_hash", e.parentBlockHash, false],
    ["token_ids", e.tokenIds, false],
    ["block_size", e.blockSize, false],
    ["lora_id", e.loraId ?? null, false],
    ["medium", MEDIUM_GPU, false],
    ["lora_name", e.loraName, false],
    // `event_version` (default 1) sits here in the newest vLLM; omitted as a default.
    ["extra_keys", extraKeysField(e, encoding), true],
  ];
}

function encodeFields(
  tag: string,
  fields: Array<[string, Packable, boolean]>,
  encoding: EventEncoding,
): Packable {
  if (encoding === "map") {
    const out: { [k: string]: Packable } = { type: tag };
    for (const [name, value, hasDefault] of fields) if (!(hasDefault && value === null)) out[name] = value;
    return out;
  }
  let n = fields.length;
  while (n > 0 && (fields[n - 1] as [string, Packable, boolean])[2] && fields[n - 1]?.[1] === null) n--;
  return [tag, ...fields.slice(0, n).map((f) => f[1])];
}

export function eventToPackable(e: KvEvent, encoding: EventEncoding): Packable {
  switch (e.type) {
    case "BlockStored":
      return encodeFields("BlockStored", storedFields(e, encoding), encoding);
    case "BlockRemoved":
      return encodeFields(
        "BlockRemoved",
        [
          ["block_hashes", e.blockHashes, false],
          ["medium", MEDIUM_GPU, false],
        ],
        encoding,
      );
    case "AllBlocksCleared":
      return encodeFields("AllBlocksCleared", [], encoding);
  }
}

/** Encodes one batch; `tsSeconds` is wall-clock (or virtual) seconds as a float, like time.time(). */
export function encodeEventBatch(
  tsSeconds: number,
  events: KvEvent[],
  dataParallelRank: number,
  encoding: EventEncoding,
): Buffer {
  return packMsgspec([
    new Float64(tsSeconds),
    events.map((e) => eventToPackable(e, encoding)),
    dataParallelRank,
  ]);
}
