// Names of the routing-outcome codes gateways put in finished-request reports
// (docs/wire-format.md §6). The names match the filter's `kvroute.requests.<name>` stats, so a
// Prometheus label, a dashboard row and an Envoy counter read the same.
export const OUTCOME_NAMES: readonly string[] = [
  "load_only",
  "prefix_hit",
  "pinned",
  "rejected",
  "fail_open",
  "speculative_hit",
  "shed",
];

/** Names of the report's priority levels (filter/core/priority.ts). */
export const PRIORITY_NAMES: readonly string[] = ["standard", "sheddable", "critical"];

/** A level this control plane does not know is shown, not dropped. */
export function priorityName(code: number): string {
  return PRIORITY_NAMES[code] ?? `level_${code}`;
}

/** The outcome of a request the gateway shed (429): it reached no slot. */
export const OUTCOME_SHED = 6;

/** A code this control plane does not know (a newer filter) is shown, not dropped. */
export function outcomeName(code: number): string {
  return OUTCOME_NAMES[code] ?? `code_${code}`;
}

/** Outcomes where the chosen slot already held (part of) the prompt's prefix. */
export function isCacheHit(code: number): boolean {
  return code === 1 || code === 5;
}
