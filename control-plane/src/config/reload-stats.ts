// What configuration reloads did, for /metrics and /v1/status: a count per result and the fields
// the running configuration still differs from the file in (they wait for a restart).

/** applied: only live fields changed · partly_applied: live fields applied, others refused ·
 * refused: only restart-only fields changed · invalid: the file did not validate · unchanged. */
export type ReloadResult = "applied" | "partly_applied" | "refused" | "invalid" | "unchanged";

export const RELOAD_RESULTS: readonly ReloadResult[] = [
  "applied",
  "partly_applied",
  "refused",
  "invalid",
  "unchanged",
];

export class ReloadStats {
  readonly counts = new Map<ReloadResult, number>(RELOAD_RESULTS.map((r) => [r, 0]));
  /** Fields the last valid file changes that only a restart applies. */
  restartPending: string[] = [];
  /** When a reload last applied something (epoch ms), 0 = never. */
  lastAppliedMs = 0;

  count(result: ReloadResult): void {
    this.counts.set(result, (this.counts.get(result) ?? 0) + 1);
  }
}
