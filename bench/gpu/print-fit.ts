// Prints both fits of the step-time model to the H200 rows and each one's error per row (the
// table in docs/simulator.md comes from here).
//   npx tsx bench/gpu/print-fit.ts
import { readFileSync } from "node:fs";
import { fitAdditive, fitRoofline, measuredSteps, predictMs, rmsRelativeError, type StepFit } from "./fit.ts";

const dir = new URL(".", import.meta.url).pathname;
const steps = measuredSteps(
  ["h200-2026-12-04.jsonl", "h200-mixed-2026-12-04.jsonl"].map((f) => readFileSync(`${dir}${f}`, "utf8")),
);
const fits: StepFit[] = [fitAdditive(steps), fitRoofline(steps)];
const used = steps.filter((s) => s.excluded === undefined);
const us = (ms: number) => `${(ms * 1000).toPrecision(4)} µs`;
const ns = (ms: number) => `${(ms * 1e6).toPrecision(3)} ns`;
for (const f of fits) {
  const terms =
    f.form === "additive"
      ? `a ${f.stepOverheadMs.toFixed(3)} ms, p ${us(f.prefillPerTokenMs)}/token, d ${us(f.decodePerSeqMs)}/seq`
      : `W ${f.stepOverheadMs.toFixed(3)} ms, t ${us(f.rowComputeMs)}/row`;
  console.log(
    `${f.form}: ${terms}, q ${ns(f.prefillAttentionPerPairMs)}/pair, k ${ns(f.kvReadPerTokenMs)}/context token; ` +
      `RMS relative error ${(rmsRelativeError(f, used) * 100).toFixed(1)}% over ${used.length} fitted rows`,
  );
}
console.log("\n| row | measured ms | additive ms (err) | roofline ms (err) |\n|---|---:|---:|---:|");
for (const s of steps) {
  const cells = fits.map((f) => {
    const p = predictMs(f, s);
    return `${p.toFixed(2)} (${(((p - s.ms) / s.ms) * 100).toFixed(1)}%)`;
  });
  console.log(
    `| ${s.label}${s.excluded ? ` — not fitted: ${s.excluded}` : ""} | ${s.ms.toFixed(2)} | ${cells.join(" | ")} |`,
  );
}
