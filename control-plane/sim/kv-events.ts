// vLLM's KV-cache event types and their msgpack wire encoding (one file per wire format).
// Batch: positional `[ts, events, data_parallel_rank]` (msgspec `array_like`). Events: either
// tagged arrays `["BlockStored", ...fields in declaration order]` (vLLM before v0.26) or tagged
// maps `{"type": "BlockStored", ...}` (v0.26+). msgspec's `omit_defaults` drops fields that
// have defaults and hold them: trailing ones in the array form, any of them in the map form.
// Fields without defaults (e.g. `lora_id`, `medium`, `lora_name`) are always written.
import type { BlockHash } from "./block-hash.ts";
import { Float64, type Packable, packMsgspec } from "./msgpack.ts";

export const MEDIUM_GPU = "GPU";
/** vLLM's offloading connector's CPU tier (cpu-tier.ts). */
export const MEDIUM_CPU = "CPU";

export interface BlockStored {
  type: "BlockStored";
  blockHashes: BlockHash[];
  parentBlockHash: BlockHash | null;
  tokenIds: number[];
  blockSize: number;
  loraName: string | null;
  /** Deprecated in vLLM in favour of loraName, still published. */
  loraId?: number | null;
  /** One entry per block: the extra keys mixed into its hash (LoRA name, then on a sequence's
   * first block the cache salt), or null. vLLM publishes this list for every stored run. */
  extraKeys: (string[] | null)[] | null;
  /** Where the blocks are: the GPU (default) or the CPU offload tier. */
  medium?: string;
}

export interface BlockRemoved {
  type: "BlockRemoved";
  blockHashes: BlockHash[];
  medium?: string;
}

export interface AllBlocksCleared {
  type: "AllBlocksCleared";
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;

export type EventEncoding = "array" | "map";

function storedFields(e: BlockStored): Array<[string, Packable, boolean]> {
  // [name, value, hasDefault]; order = vLLM's field declaration order. extra_keys holds raw
  // values in both encodings (vllm/distributed/kv_events.py: list[tuple[Any, ...] | None]).
  return [
    ["block_hashes", e.blockHashes, false],
    ["parent_block_hash", e.parentBlockHash, false],
    ["token_ids", e.tokenIds, false],
    ["block_size", e.blockSize, false],
    ["lora_id", e.loraId ?? null, false],
    ["medium", e.medium ?? MEDIUM_GPU, false],
    ["lora_name", e.loraName, false],
    ["extra_keys", e.extraKeys, true],
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
      return encodeFields("BlockStored", storedFields(e), encoding);
    case "BlockRemoved":
      return encodeFields(
        "BlockRemoved",
        [
          ["block_hashes", e.blockHashes, false],
          ["medium", e.medium ?? MEDIUM_GPU, false],
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
