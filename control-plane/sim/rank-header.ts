// DP-rank selection by header, with vLLM's semantics (the simulator must answer exactly as
// vLLM does, including its leniency, so routers can be tested against it):
// - `X-data-parallel-rank` (case-insensitive) is read with Python's `int()`: surrounding
//   whitespace, one sign, and single underscores between digits are accepted, anything else
//   makes vLLM ignore the header and balance normally;
// - the parsed rank must lie in [0, n), n = the ranks this API server fronts (all of them in
//   internal LB, the local ones in hybrid/external LB, so there the value is a local index);
//   otherwise vLLM raises `ValueError("data_parallel_rank R is out of range [0, n).")`, which
//   the OpenAI server returns as a 400 BadRequestError.

export const RANK_HEADER = "x-data-parallel-rank";

// Characters Python's str.strip() removes that HTTP header values can carry (ASCII and
// Latin-1 whitespace, including the separators 0x1c-0x1f that JavaScript's \s lacks).
function isPyWhitespace(c: number): boolean {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c === 0x85 || c === 0xa0;
}

/** Python `int(s)` for base 10 over ASCII digits; null where Python raises ValueError. */
export function parsePythonInt(s: string): bigint | null {
  let a = 0;
  let b = s.length;
  while (a < b && isPyWhitespace(s.charCodeAt(a))) a++;
  while (b > a && isPyWhitespace(s.charCodeAt(b - 1))) b--;
  const m = /^([+-]?)([0-9]+(?:_[0-9]+)*)$/.exec(s.slice(a, b));
  if (!m) return null;
  const v = BigInt((m[2] as string).replaceAll("_", ""));
  return m[1] === "-" ? -v : v;
}

export type RankChoice =
  | { kind: "balance" }
  | { kind: "index"; index: number }
  | { kind: "error"; status: 400; message: string };

/** Interprets a rank header for a server fronting `numRanks` engines. */
export function resolveRankHeader(value: string | undefined, numRanks: number): RankChoice {
  if (value === undefined) return { kind: "balance" };
  const r = parsePythonInt(value);
  if (r === null) return { kind: "balance" };
  if (r < 0n || r >= BigInt(numRanks)) {
    return {
      kind: "error",
      status: 400,
      message: `data_parallel_rank ${r} is out of range [0, ${numRanks}).`,
    };
  }
  return { kind: "index", index: Number(r) };
}

export type DpMode = "internal" | "hybrid" | "external";

export interface DpTopology {
  mode: DpMode;
  /** --data-parallel-size: ranks in the whole deployment. */
  size: number;
  /** --data-parallel-size-local: ranks on this node. */
  sizeLocal: number;
  /** --data-parallel-start-rank: global rank of this node's first rank. */
  startRank: number;
}

/** The API servers this node runs: each fronts a list of global ranks; port offset from --port. */
export interface FrontSpec {
  portOffset: number;
  ranks: number[];
}

export function frontsOf(t: DpTopology): FrontSpec[] {
  const local = Array.from({ length: t.sizeLocal }, (_, i) => t.startRank + i);
  switch (t.mode) {
    case "internal":
      // One API server balancing over every rank.
      return [{ portOffset: 0, ranks: Array.from({ length: t.size }, (_, i) => i) }];
    case "hybrid":
      return [{ portOffset: 0, ranks: local }];
    case "external":
      // One API server per rank, rank r of this node at port + (r - start).
      return local.map((r, i) => ({ portOffset: i, ranks: [r] }));
  }
}

/** Ranks whose engines this node simulates. */
export function simulatedRanks(t: DpTopology): number[] {
  return t.mode === "internal"
    ? Array.from({ length: t.size }, (_, i) => i)
    : Array.from({ length: t.sizeLocal }, (_, i) => t.startRank + i);
}
