// Where a cached block lives, as the index and the filter rank it: a GPU block saves its whole
// prefill, a block on CPU memory or storage saves less (it must be loaded first; weights in
// `routing.tierWeights`, docs/configuration.md). The engines name their media differently;
// this is the one place that maps them. Tier numbers travel in bucket images
// (docs/wire-format.md §4.4), so they are part of the wire format.

export const TIER_GPU = 0;
export const TIER_CPU = 1;
export const TIER_STORAGE = 2;
export type Tier = typeof TIER_GPU | typeof TIER_CPU | typeof TIER_STORAGE;
export const TIER_COUNT = 3;
export const TIER_NAMES = ["gpu", "cpu", "storage"] as const;
export type TierName = (typeof TIER_NAMES)[number];

/**
 * Engine medium names → tier (exact, case-sensitive, as the engines write them):
 * vLLM GPU/CPU/STORAGE (vllm/distributed/kv_events.py, offloading connector); SGLang GPU,
 * CPU_PINNED, DISK, EXTERNAL and, since HiCache tier events, CPU_TIER1 (host memory, L2) and
 * CPU_TIER2 (its storage backend, L3; Dynamo's router maps it to Disk the same way).
 */
const TIER_BY_MEDIUM: ReadonlyMap<string, Tier> = new Map<string, Tier>([
  ["GPU", TIER_GPU],
  ["CPU", TIER_CPU],
  ["CPU_PINNED", TIER_CPU],
  ["CPU_TIER1", TIER_CPU],
  ["CPU_TIER2", TIER_STORAGE],
  ["STORAGE", TIER_STORAGE],
  ["DISK", TIER_STORAGE],
  ["EXTERNAL", TIER_STORAGE],
]);

/** The tier of an engine medium (null/"" were normalised to "GPU" by the decoder); null for a
 * medium kvroute does not know, whose blocks are counted and not indexed (never guess a tier). */
export function tierOfMedium(medium: string): Tier | null {
  return TIER_BY_MEDIUM.get(medium) ?? null;
}
