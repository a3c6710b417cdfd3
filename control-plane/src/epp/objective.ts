// GAIE's InferenceObjective in the picker (docs/gaie.md "Priority"): a client names an objective in
// `x-llm-d-inference-objective` (llm-d-router, pkg/epp/metadata/consts.go) or the deprecated
// `x-gateway-inference-objective` (read when the first is absent, as the reference reads its
// aliases); the objective's integer `priority` (higher is more important, unset = 0, negative =
// may be shed first) becomes one of the filter's levels — negative → sheddable, 0 → standard,
// positive → critical — written into the priority header of the request the embedded filter sees.
// The filter then treats it as any gateway's priority header: strict levels, `critical` only for
// trusted clients, never forwarded.
//
// The priorities come from the configuration (`epp.objectives`) and, when `epp.resources` names a
// namespace, from the InferenceObjective resources there (resource-watch.ts), which win. An
// objective neither lists leaves the request as it came (counted).
import type { Pairs } from "./header-mutation.ts";

/** The reference's objective header, then its deprecated alias (read in this order). */
export const OBJECTIVE_HEADERS: readonly string[] = [
  "x-llm-d-inference-objective",
  "x-gateway-inference-objective",
];

export type PriorityLevel = "critical" | "standard" | "sheddable";

/** GAIE's integer priority as a kvroute level. */
export function levelOf(priority: number): PriorityLevel {
  if (priority < 0) return "sheddable";
  return priority > 0 ? "critical" : "standard";
}

export interface ObjectiveMap {
  /** The headers naming the objective, the first present one counts (OBJECTIVE_HEADERS). */
  objectiveHeaders: readonly string[];
  /** The filter's priority header (routing.priorityHeader). */
  priorityHeader: string;
  /** Objective name → GAIE priority (read per request: watched objectives change it). */
  priorities: { get(name: string): number | undefined };
}

export type ObjectiveResult = "none" | "mapped" | "unknown";

/**
 * The request headers the embedded filter sees: when the first objective header present holds
 * exactly one value naming a known objective, every priority header of the client is replaced by
 * the objective's level; otherwise the headers are unchanged ("unknown" when an objective was
 * named, repeated, or not known).
 */
export function applyObjective(pairs: Pairs, m: ObjectiveMap): { pairs: Pairs; result: ObjectiveResult } {
  let named: string[] = [];
  for (const name of m.objectiveHeaders) {
    named = pairs.filter(([k]) => k.toLowerCase() === name).map(([, v]) => v);
    if (named.length > 0) break;
  }
  if (named.length === 0) return { pairs, result: "none" };
  const priority = named.length === 1 ? m.priorities.get(named[0] as string) : undefined;
  if (priority === undefined) return { pairs, result: "unknown" };
  const out: Pairs = pairs.filter(([k]) => k.toLowerCase() !== m.priorityHeader);
  out.push([m.priorityHeader, levelOf(priority)]);
  return { pairs: out, result: "mapped" };
}
