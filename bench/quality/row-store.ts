// Finished runs of the quality bench, one JSON line each, so a full run (hours on a small machine)
// survives being stopped and can be split across processes: a run already in the file for the
// same configuration is read back instead of measured again. Lines are appended whole (O_APPEND),
// so several processes may share one file.
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import type { ResultRow } from "./report.ts";

/** JSON has no NaN or ±Infinity; metrics use them (a run too short to judge), so they travel as strings. */
const replacer = (_k: string, v: unknown) => (typeof v === "number" && !Number.isFinite(v) ? String(v) : v);
const reviver = (_k: string, v: unknown) =>
  v === "NaN" || v === "Infinity" || v === "-Infinity" ? Number(v) : v;

const keyOf = (r: Pick<ResultRow, "profile" | "workload" | "qps" | "policy" | "seed">) =>
  `${r.profile}\u0000${r.workload}\u0000${r.qps}\u0000${r.policy}\u0000${r.seed}`;

export class RowStore {
  readonly #rows = new Map<string, ResultRow>();

  /** `configKey(policy)` names everything a policy's row depends on besides its point (sizes,
   * delays, and for kvroute the gateway geometry and the filter build — a peer's rows do not
   * depend on those, so they survive a rebuild of the filter). */
  constructor(
    readonly path: string | undefined,
    readonly configKey: (policy: string) => string,
  ) {
    if (path === undefined || !existsSync(path)) return;
    for (const line of readFileSync(path, "utf8").split("\n")) {
      if (line.trim() === "") continue;
      const { config, row } = JSON.parse(line, reviver) as { config: string; row: ResultRow };
      if (config === configKey(row.policy)) this.#rows.set(keyOf(row), row);
    }
  }

  get size(): number {
    return this.#rows.size;
  }

  get(profile: string, workload: string, qps: number, policy: string, seed: number): ResultRow | undefined {
    return this.#rows.get(keyOf({ profile, workload, qps, policy, seed }));
  }

  add(row: ResultRow): void {
    this.#rows.set(keyOf(row), row);
    if (this.path !== undefined)
      appendFileSync(this.path, `${JSON.stringify({ config: this.configKey(row.policy), row }, replacer)}\n`);
  }
}
