import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { fitAdditive, fitRoofline, measuredSteps, predictMs, rmsRelativeError } from "../../bench/gpu/fit.ts";
import { H200_MEASURED_LATENCY, LATENCY_PROFILES, latencyProfile } from "../../control-plane/sim/latency.ts";

const rows = ["h200-2026-12-04.jsonl", "h200-mixed-2026-12-04.jsonl"].map((f) =>
  readFileSync(new URL(`../../bench/gpu/${f}`, import.meta.url), "utf8"),
);
const steps = measuredSteps(rows);

describe("the h200-measured profile is the fit of the committed H200 rows", () => {
  it("reads every decode, prefill and mixed row, and keeps the PyTorch artefacts out of the fit", () => {
    expect(steps.filter((s) => s.label.startsWith("decode"))).toHaveLength(19);
    expect(steps.filter((s) => s.label.startsWith("prefill"))).toHaveLength(13);
    expect(steps.filter((s) => s.label.startsWith("mixed"))).toHaveLength(6);
    expect(steps.filter((s) => s.excluded !== undefined)).toHaveLength(8);
  });

  it("the profile's constants are the additive fit, to the digits written", () => {
    const f = fitAdditive(steps);
    expect(H200_MEASURED_LATENCY.stepOverheadMs).toBeCloseTo(f.stepOverheadMs, 3);
    expect(H200_MEASURED_LATENCY.prefillPerTokenMs).toBeCloseTo(f.prefillPerTokenMs, 5);
    expect(H200_MEASURED_LATENCY.decodePerSeqMs).toBeCloseTo(f.decodePerSeqMs, 5);
    expect((H200_MEASURED_LATENCY.kvReadPerTokenMs ?? 0) * 1e6).toBeCloseTo(f.kvReadPerTokenMs * 1e6, 1);
    expect((H200_MEASURED_LATENCY.prefillAttentionPerPairMs ?? 0) * 1e6).toBeCloseTo(
      f.prefillAttentionPerPairMs * 1e6,
      2,
    );
  });

  it("the additive form fits the fitted rows better than the roofline", () => {
    const used = steps.filter((s) => s.excluded === undefined);
    const additive = rmsRelativeError(fitAdditive(steps), used);
    expect(additive).toBeLessThan(0.05);
    expect(additive).toBeLessThan(rmsRelativeError(fitRoofline(steps), used));
  });

  it("predicts a decode step from its terms", () => {
    const f = { ...fitAdditive(steps), stepOverheadMs: 5, decodePerSeqMs: 0.01, kvReadPerTokenMs: 0.001 };
    const s = { label: "x", prefillTokens: 0, pairs: 0, decodeSeqs: 10, contextTokens: 100, ms: 1 };
    expect(predictMs(f, s)).toBeCloseTo(5 + 0.1 + 0.1, 9);
  });

  it("profiles are selectable by name", () => {
    expect(latencyProfile("h200-measured")).toBe(H200_MEASURED_LATENCY);
    expect(Object.keys(LATENCY_PROFILES)).toEqual(["h100-derived", "h200-measured"]);
    expect(() => latencyProfile("a100")).toThrow(RangeError);
  });
});
