// Everything a pool's tokenizer gives the control plane, built once at start: token ids →
// bytes for KV events, the verified segment template and BOS text for the filter's config.
// A pool without a tokenizer (or with one we cannot use) still routes: by load and
// speculative affinity; the reason is logged and shown in the status API.
import type { PoolConfig } from "../config/schema.ts";
import { encodeSegmentTemplate, renderChat } from "../core/kvroute-core.ts";
import type { SegmentTemplate } from "../core/segment-template.ts";
import type { Detokenize } from "../index/slot-blocks.ts";
import { bosTextOf } from "../tokens/bos-text.ts";
import { deriveSegmentTemplate } from "../tokens/derive-segment-template.ts";
import { detokenizeInto } from "../tokens/detokenize.ts";
import { buildTokenBytesTable, type TokenBytesTable } from "../tokens/token-bytes-table.ts";
import { loadTokenizerFiles } from "../tokens/tokenizer-files.ts";

/** What the control plane knows about a pool beyond its config: derived from its tokenizer. */
export interface PoolRendering {
  /** Text the tokenizer prepends to a completion prompt (its BOS), "" when none. */
  bosText: string;
  /** The core's binary segment template; empty when the chat template is not segmentable. */
  segmentTemplate: Uint8Array;
}

export interface PoolTokens {
  /** null: KV events of this pool cannot be turned into chunk hashes. */
  detokenize: Detokenize | null;
  /** The table `detokenize` reads (the index copies it into the core and detokenizes there). */
  tokenTable: TokenBytesTable | null;
  segmentTemplate: SegmentTemplate | null;
  rendering: PoolRendering;
  /** Why something above is missing, for logs (warn) and /v1/status. */
  problems: string[];
  /** What the segment-template derivation left out and why (info: chats with those roles render partially). */
  notes: string[];
}

export function loadPoolTokens(pool: PoolConfig): PoolTokens {
  const none: PoolTokens = {
    detokenize: null,
    tokenTable: null,
    segmentTemplate: null,
    rendering: { bosText: "", segmentTemplate: new Uint8Array() },
    problems: [],
    notes: [],
  };
  if (pool.tokenizer === undefined) {
    none.problems.push("no tokenizer configured: routing by load and speculative affinity only");
    return none;
  }
  let files: ReturnType<typeof loadTokenizerFiles>;
  try {
    files = loadTokenizerFiles(pool.tokenizer);
  } catch (err) {
    none.problems.push((err as Error).message);
    return none;
  }
  const problems: string[] = [];
  const built = buildTokenBytesTable(files.tokenizer);
  let detok: Detokenize | null = null;
  if (built.ok) {
    const table = built.table;
    // One scratch buffer, reused: ingest runs this per KV block, and the chunk hasher copies
    // the bytes into Wasm memory right away, so a fresh array per block would only feed the GC.
    let scratch = new Uint8Array(4096);
    detok = (ids, previous) => {
      const need = ids.length * table.maxTokenBytes;
      if (need > scratch.length) scratch = new Uint8Array(need);
      const n = detokenizeInto(table, ids, scratch, 0, previous);
      return typeof n === "number" ? scratch.subarray(0, n) : null;
    };
  } else {
    problems.push(`token bytes: ${built.reason}`);
  }
  const derived = deriveSegmentTemplate(files, renderChat);
  let segmentTemplate: SegmentTemplate | null = null;
  if (derived.ok) {
    segmentTemplate = derived.template;
  } else {
    problems.push(`chat template: ${derived.reason}`);
  }
  return {
    detokenize: detok,
    tokenTable: built.ok ? built.table : null,
    segmentTemplate,
    rendering: {
      bosText: bosTextOf(files.tokenizer),
      segmentTemplate: segmentTemplate === null ? new Uint8Array() : encodeSegmentTemplate(segmentTemplate),
    },
    problems,
    notes: derived.ok ? derived.notes : [],
  };
}
