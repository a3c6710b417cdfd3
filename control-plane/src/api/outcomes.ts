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
];

/** A code this control plane does not know (a newer filter) is shown, not dropped. */
export function outcomeName(code: number): string {
  return OUTCOME_NAMES[code] ?? `code_${code}`;
}

/** Outcomes where the chosen slot already held (part of) the prompt's prefix. */
export function isCacheHit(code: number): boolean {
  return code === 1 || code === 5;
}
