import { readFileSync } from "node:fs";
import { pointsOf, type ResultRow } from "../quality/points.ts";
import { pairedStandings, trailingPeers } from "../quality/standing.ts";
const rows: ResultRow[] = readFileSync(process.argv[2] as string, "utf8").trim().split("\n").map((l) => JSON.parse(l).row).filter((r: ResultRow) => !r.policy.includes("1 gateway"));
const pts = pointsOf(rows);
let total = 0;
for (const profile of ["h200-measured", "h100-derived"]) {
  const st = pairedStandings(pts.filter((p) => p.profile === profile));
  const trailing = st.filter((s) => !s.saturated && trailingPeers(s).length > 0);
  const sat = st.filter((s) => s.saturated);
  console.log(profile, "points", st.length, "saturated", sat.map((s) => `${s.workload}@${s.qps}`).join(" "));
  for (const s of trailing) console.log("  trails", `${s.workload}@${s.qps}`, s.peers.flatMap((c) => (["ttftP90", "ttftP99"] as const).filter((m) => c.byMetric[m].verdict === "trails").map((m) => `${c.peer.policy} ${m.slice(4)} +${c.byMetric[m].medianDiffMs.toFixed(0)}ms (${(100 * c.byMetric[m].medianDiffShare).toFixed(0)}%)`)).join("; "));
  total += trailing.reduce((n, s) => n + s.subject.runs.length, 0);
}
console.log("one-gateway runs", total);
