import { describe, expect, it } from "vitest";
import { closingNotes } from "../../bench/quality/analysis.ts";
import { summarize } from "../../bench/quality/metrics.ts";
import { pointsOf, type ResultRow, variantLines } from "../../bench/quality/report.ts";

/** Six seeds of one policy at one point, TTFT p90 from `ttft`, every seed with the same per-rank counts. */
function rows(
  policy: string,
  ttft: readonly number[],
  perRank: readonly number[],
  workload = "w",
): ResultRow[] {
  return ttft.map((t, i) => ({
    profile: "p",
    workload,
    qps: 16,
    policy,
    seed: i + 1,
    unfinished: 0,
    wallS: 0,
    metrics: {
      ...summarize([], 1, () => 0),
      ttftP90: t,
      ttftP99: t,
      e2eP90: t * 10,
      hitRate: 0.5,
      requestsPerRank: [...perRank],
      requestImbalance: Math.max(...perRank) / (perRank.reduce((a, b) => a + b, 0) / perRank.length),
    },
  }));
}
const slow = [30, 31, 32, 33, 34, 35];
const fast = [10, 11, 12, 13, 14, 15];
const even = [5, 5, 5, 5];
const twoIdle = [10, 0, 10, 0];

describe("closing notes: causes printed only where the run shows them", () => {
  it("idle ranks: kvroute behind a router that used every rank while it left ranks idle", () => {
    const notes = closingNotes(
      pointsOf([...rows("kvroute", slow, twoIdle), ...rows("sglang-cache-aware", fast, even)]),
      [],
    );
    const idle = notes.find((n) => n.includes("ranks idle"));
    expect(idle).toContain("w @ 16 QPS: 2 of 4 ranks idle, E2E p90 325 ms against sglang-cache-aware 125");
    expect(idle).toContain("least-loaded worker");
  });

  it("no idle-rank note when the router ahead left ranks idle too, or when kvroute is not behind", () => {
    const alsoIdle = closingNotes(
      pointsOf([...rows("kvroute", slow, twoIdle), ...rows("dynamo", fast, twoIdle)]),
      [],
    );
    expect(alsoIdle.some((n) => n.includes("ranks idle"))).toBe(false);
    const tied = closingNotes(
      pointsOf([...rows("kvroute", fast, twoIdle), ...rows("dynamo", slow, even)]),
      [],
    );
    expect(tied.some((n) => n.includes("ranks idle"))).toBe(false);
  });

  it("rotation: round robin ahead gives the spread of kvroute's per-rank counts; another router ahead does not", () => {
    const rr = closingNotes(
      pointsOf([...rows("kvroute", slow, [6, 4, 5, 5]), ...rows("round-robin", fast, even)]),
      [],
    );
    expect(rr.find((n) => n.startsWith("Round robin is ahead"))).toContain(
      "w @ 16 QPS: busiest rank 1.20× the mean",
    );
    const other = closingNotes(
      pointsOf([...rows("kvroute", slow, [6, 4, 5, 5]), ...rows("dynamo", fast, even)]),
      [],
    );
    expect(other.some((n) => n.startsWith("Round robin is ahead"))).toBe(false);
  });

  it("rotation: says where the same filter as one gateway is still behind round robin, and only there", () => {
    const points = pointsOf([...rows("kvroute", slow, [6, 4, 5, 5]), ...rows("round-robin", fast, even)]);
    const note = (oneGatewayP90: number[]) =>
      closingNotes(points, [], pointsOf(rows("kvroute (1 gateway × 8 threads)", oneGatewayP90, even))).find(
        (n) => n.startsWith("Round robin is ahead"),
      );
    expect(note([20, 21, 22, 23, 24, 25])).toContain(
      "As one gateway it is still behind at w @ 16 QPS (one gateway − round robin, paired: p90 trails +10 ms (+80%), p99 trails +10 ms (+80%)): there the gap is the estimate itself",
    );
    expect(note([5, 6, 7, 8, 9, 10])).not.toContain("As one gateway");
  });
});

describe("closing notes: the run's evidence where kvroute trails", () => {
  it("prints hit rate, spread and E2E of kvroute and of the peer ahead, and nothing where it does not trail", () => {
    const notes = closingNotes(
      pointsOf([...rows("kvroute", slow, twoIdle), ...rows("dynamo", fast, even)]),
      [],
    );
    const evidence = notes.find((n) => n.startsWith("Evidence where kvroute trails"));
    expect(evidence).toContain(
      "w @ 16 QPS — kvroute hit 50.0%, busiest rank 2.00× mean, E2E p90 325 ms, 2 ranks unused",
    );
    expect(evidence).toContain("dynamo hit 50.0%, busiest rank 1.00× mean, E2E p90 125 ms, 0 ranks unused");
    const ahead = closingNotes(pointsOf([...rows("kvroute", fast, even), ...rows("dynamo", slow, even)]), []);
    expect(ahead.some((n) => n.startsWith("Evidence"))).toBe(false);
  });

  it("a saturated point is set apart, not counted as trailing", () => {
    const floor = [1, 1, 1, 1, 1, 1];
    const notes = closingNotes(
      pointsOf([
        ...rows("kvroute", slow, even),
        ...rows("dynamo", fast, even),
        ...rows("ideal-bound", floor, even),
      ]),
      [],
    );
    expect(notes.some((n) => n.includes("trails a peer"))).toBe(false);
  });

  it("one gateway: where kvroute trails, the same filter as one gateway is paired against the peer ahead", () => {
    const points = pointsOf([...rows("kvroute", slow, even), ...rows("sglang-cache-aware", fast, even)]);
    const oneGateway = pointsOf(rows("kvroute (1 gateway × 8 threads)", [9, 10, 11, 12, 13, 14], even));
    const note = closingNotes(points, [], oneGateway).find((n) => n.includes("as one gateway"));
    expect(note).toContain("kvroute (1 gateway × 8 threads)");
    expect(note).toContain("w @ 16 QPS — TTFT p90 / p99 12 / 12 ms (two gateways: 33 / 33)");
    expect(note).toContain("against sglang-cache-aware p90 leads −1 ms (−8%), p99 leads −1 ms (−8%)");
    // Not behind anyone: no note, even with one-gateway runs at hand.
    const ahead = pointsOf([...rows("kvroute", fast, even), ...rows("sglang-cache-aware", slow, even)]);
    expect(closingNotes(ahead, [], oneGateway).some((n) => n.includes("as one gateway"))).toBe(false);
  });

  it("sensitivity: a variant ahead of the default is named with its paired effect, never at a saturated point", () => {
    const variant = (ttft: readonly number[]) => rows("kvroute (inflightWeight 0.5)", ttft, even);
    const lighter = [20, 21, 22, 23, 24, 25];
    const trailing = pointsOf([...rows("kvroute", slow, even), ...rows("sglang-cache-aware", fast, even)]);
    const sensitivity = pointsOf([...rows("kvroute", slow, even), ...variant(lighter)]);
    const note = closingNotes(trailing, sensitivity).find((n) => n.startsWith("The queue term"));
    expect(note).toContain("w @ 16 QPS 33 ms → 23 ms, paired −10 ms (−31%)");
    // The same variant no better than the default: no cause named.
    const same = pointsOf([...rows("kvroute", slow, even), ...variant(slow)]);
    expect(closingNotes(trailing, same).some((n) => n.startsWith("The queue term"))).toBe(false);
    // At a saturated point (every router's TTFT ≫ the ideal bound's floor) the lead says nothing of the rule.
    const saturated = pointsOf([
      ...rows("kvroute", slow, even),
      ...rows("sglang-cache-aware", fast, even),
      ...rows("ideal-bound", [1, 1, 1, 1, 1, 1], even),
      // Another point where kvroute trails, so the notes are written at all.
      ...rows("kvroute", slow, even, "v"),
      ...rows("sglang-cache-aware", fast, even, "v"),
    ]);
    expect(closingNotes(saturated, sensitivity).some((n) => n.includes("trails a peer"))).toBe(true);
    expect(closingNotes(saturated, sensitivity).some((n) => n.startsWith("The queue term"))).toBe(false);
  });
});

describe("the sensitivity section: each variant decided against the default, paired per seed", () => {
  const point = pointsOf([
    ...rows("kvroute", slow, even),
    ...rows("kvroute (reports every 100 ms)", fast, even),
    ...rows("kvroute (events 0 ms late)", slow, even),
    ...rows("ideal-bound", [1, 1, 1, 1, 1, 1], even),
  ]);

  it("gives each variant's verdict and paired effect, and leaves the default and the bound out", () => {
    const lines = variantLines(point, false);
    expect(lines[0]).toContain("variant − kvroute, exact Wilcoxon signed-rank at 0.05):");
    expect(lines).toContain(
      "- kvroute (reports every 100 ms): TTFT p90 leads −20 ms (−62%), p99 leads −20 ms (−62%)",
    );
    expect(lines).toContain("- kvroute (events 0 ms late): TTFT p90 ties 0 ms (0%), p99 ties 0 ms (0%)");
    expect(lines.some((l) => l.startsWith("- kvroute:") || l.startsWith("- ideal-bound"))).toBe(false);
  });

  it("marks a saturated point, where the differences say little of the rule", () => {
    expect(variantLines(point, true)[0]).toContain("**a saturated point**");
    expect(variantLines(point, false)[0]).not.toContain("saturated");
  });
});
