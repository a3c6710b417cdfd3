// GAIE's InferenceObjective in the picker (docs/gaie.md "Priority"): a GAIE gateway's client names
// an objective in `x-gateway-inference-objective`; the objective's integer `priority` (higher is
// more important, unset = 0, negative = may be shed first) becomes one of the filter's levels —
// negative → sheddable, 0 → standard, positive → critical — written into the priority header of
// the request the embedded filter sees. The filter then treats it as any gateway's priority
// header: strict levels, `critical` only for trusted clients, never forwarded.
//
// The objectives come from the configuration (`epp.objectives`), not from a watch of the
// InferenceObjective resources: the picker maps what the operator listed. An objective the list
// does not name leaves the request as it came (counted).
import type { Pairs } from "./header-mutation.ts";

export const OBJECTIVE_HEADER = "x-gateway-inference-objective";

export type PriorityLevel = "critical" | "standard" | "sheddable";

/** GAIE's integer priority as a kvroute level. */
export function levelOf(priority: number): PriorityLevel {
  if (priority < 0) return "sheddable";
  return priority > 0 ? "critical" : "standard";
}

export interface ObjectiveMap {
  /** The header naming the objective (GAIE: x-gateway-inference-objective). */
  objectiveHeader: string;
  /** The filter's priority header (routing.priorityHeader). */
  priorityHeader: string;
  /** Objective name → GAIE priority. */
  priorities: ReadonlyMap<string, number>;
}

export type ObjectiveResult = "none" | "mapped" | "unknown";

/**
 * The request headers the embedded filter sees: when the objective header holds exactly one
 * value naming a listed objective, every priority header of the client is replaced by the
 * objective's level; otherwise the headers are unchanged ("unknown" when an objective was named,
 * repeated, or not listed).
 */
export function applyObjective(pairs: Pairs, m: ObjectiveMap): { pairs: Pairs; result: ObjectiveResult } {
  const named = pairs.filter(([k]) => k.toLowerCase() === m.objectiveHeader).map(([, v]) => v);
  if (named.length === 0) return { pairs, result: "none" };
  const priority = named.length === 1 ? m.priorities.get(named[0] as string) : undefined;
  if (priority === undefined) return { pairs, result: "unknown" };
  const out: Pairs = pairs.filter(([k]) => k.toLowerCase() !== m.priorityHeader);
  out.push([m.priorityHeader, levelOf(priority)]);
  return { pairs: out, result: "mapped" };
}
