// The cache contents and requests the scaling bench checks the gateway's view with (issue 31):
// - llm-d's benchmark shape (REFERENCE §6: 150 groups, a 6k-token system prompt each, 1.2k-token
//   questions): each group's system prompt and two earlier questions cached on its home rank
//   (half the groups on a second rank too); a request is the system prompt and a new question;
// - multi-turn chat: conversations of 1–8 turns (~512 tokens each, user and assistant) cached on
//   the rank that served them; a request is the history and a new turn.
// The cached chains are KV events to send through the ranks' real ingest; a request is its
// prompt's token stream in bytes (what the filter would hash), for both sides to look up.
import type { KvEvent } from "../../control-plane/sim/kv-events.ts";

export const GROUPS = 150;
const SYSTEM_BLOCKS = 375; // 6k tokens
const QUESTION_BLOCKS = 75; // 1.2k tokens
const CACHED_QUESTIONS = 2;
export const CHATS = 150;
const TURN_BLOCKS = 32; // ~512 tokens
const MAX_TURNS = 8;
const BLOCK_TOKENS = 16;
/** Blocks per BlockStored event (an engine step stores a few dozen blocks of a long prompt). */
const EVENT_BLOCKS = 64;

const KIND_SYSTEM = 1;
const KIND_QUESTION = 2;
const KIND_CHAT = 3;

export type Detokenize = (ids: ArrayLike<number>, previous: number) => Uint8Array | null;

export interface ViewRequest {
  kind: "llm-d" | "chat";
  /** The prompt's bytes (its token stream). */
  stream: Uint8Array;
}

/** A content block: token ids unique to (kind, id) from the first block on (the chain differs). */
function tokens(kind: number, id: number, b: number): number[] {
  const ids: number[] = [];
  for (let t = 0; t < BLOCK_TOKENS; t++)
    ids.push(1000 + (((b * BLOCK_TOKENS + t) * 37 + id * 101 + kind * 7) % 50_000));
  if (b === 0) {
    ids[0] = 63_000 + kind;
    ids[1] = 64_000 + (id % 1000);
    ids[2] = 65_000 + Math.floor(id / 1000);
  }
  return ids;
}

/** The engine's block hash of a block (content-addressed: the same prefix has the same hashes on every rank). */
function blockHash(kind: number, id: number, b: number): bigint {
  return 2n ** 63n + (BigInt(kind) << 48n) + (BigInt(id) << 24n) + BigInt(b);
}

interface Block {
  hash: bigint;
  tokens: number[];
}

const blocks = (kind: number, id: number, from: number, n: number): Block[] =>
  Array.from({ length: n }, (_, i) => ({
    hash: blockHash(kind, id, from + i),
    tokens: tokens(kind, id, from + i),
  }));

/** BlockStored events for `chain` stored after `parent` (null: a chain's first block). */
function stored(chain: Block[], parent: bigint | null): KvEvent[] {
  const events: KvEvent[] = [];
  for (let i = 0; i < chain.length; i += EVENT_BLOCKS) {
    const part = chain.slice(i, i + EVENT_BLOCKS);
    const before = i === 0 ? parent : (chain[i - 1] as Block).hash;
    events.push({
      type: "BlockStored",
      blockHashes: part.map((b) => b.hash),
      parentBlockHash: before,
      tokenIds: part.flatMap((b) => b.tokens),
      blockSize: BLOCK_TOKENS,
      loraName: null,
      extraKeys: null,
    });
  }
  return events;
}

function streamOf(chain: Block[], detokenize: Detokenize): Uint8Array {
  const parts: Uint8Array[] = [];
  let previous = -1;
  for (const b of chain) {
    const bytes = detokenize(b.tokens, previous);
    if (bytes === null) throw new Error("a bench token has no bytes");
    parts.push(bytes.slice());
    previous = b.tokens[b.tokens.length - 1] as number;
  }
  return Buffer.concat(parts);
}

/** Deterministic pseudo-random integers (a fleet size's workload is the same run to run). */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x;
  };
}

/** The events to store on each rank, and the requests to look up once they are indexed. */
export function viewWorkload(
  ranks: number,
  detokenize: Detokenize,
): {
  events: Map<number, KvEvent[]>;
  requests: ViewRequest[];
  /** Round `r` of llm-d's traffic meanwhile: one more question per group, stored on its home ranks. */
  followUp: (round: number) => Map<number, KvEvent[]>;
} {
  const events = new Map<number, KvEvent[]>();
  const on = (rank: number, e: KvEvent[]) => events.set(rank, [...(events.get(rank) ?? []), ...e]);
  const requests: ViewRequest[] = [];
  const rnd = lcg(ranks);
  const groupHomes: Array<{ homes: Set<number>; last: bigint }> = [];
  for (let g = 0; g < GROUPS; g++) {
    const system = blocks(KIND_SYSTEM, g, 0, SYSTEM_BLOCKS);
    const last = (system[system.length - 1] as Block).hash;
    const homes = g % 2 === 0 ? [rnd() % ranks, rnd() % ranks] : [rnd() % ranks];
    groupHomes.push({ homes: new Set(homes), last });
    for (const rank of new Set(homes)) {
      on(rank, stored(system, null));
      for (let q = 0; q < CACHED_QUESTIONS; q++)
        on(rank, stored(blocks(KIND_QUESTION, g * 100 + q, 0, QUESTION_BLOCKS), last));
    }
    const question = blocks(KIND_QUESTION, g * 100 + 99, 0, QUESTION_BLOCKS);
    requests.push({ kind: "llm-d", stream: streamOf([...system, ...question], detokenize) });
  }
  for (let c = 0; c < CHATS; c++) {
    const turns = 1 + (rnd() % MAX_TURNS);
    const history = blocks(KIND_CHAT, c, 0, turns * TURN_BLOCKS);
    on(rnd() % ranks, stored(history, null));
    const next = blocks(KIND_CHAT, c, turns * TURN_BLOCKS, TURN_BLOCKS);
    requests.push({ kind: "chat", stream: streamOf([...history, ...next], detokenize) });
  }
  const followUp = (round: number) => {
    const out = new Map<number, KvEvent[]>();
    groupHomes.forEach(({ homes, last }, g) => {
      // Question ids 10… are neither cached at the start (0, 1) nor asked (99).
      const question = stored(blocks(KIND_QUESTION, g * 100 + 10 + (round % 80), 0, QUESTION_BLOCKS), last);
      for (const rank of homes) out.set(rank, [...(out.get(rank) ?? []), ...question]);
    });
    return out;
  };
  return { events, requests, followUp };
}
