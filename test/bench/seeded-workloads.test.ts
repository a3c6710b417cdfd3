// The one-gateway runs of the quality report are paired seed by seed with the peers' runs, so
// each must run its own seed's arrivals, though the report reads every workload's name and ladder
// from one seed's build. (They once ran one seed's arrivals for all eight.)
import { describe, expect, it } from "vitest";
import { type BenchConfig, benchConfig } from "../../bench/quality/config.ts";
import { SeededWorkloads } from "../../bench/quality/seeded-workloads.ts";
import type { Workload } from "../../bench/quality/workloads/types.ts";

/** A stand-in for config.ts workloads(): each arrival's prompt names the seed it was built with. */
function fakeWorkloads(c: BenchConfig): Workload[] {
  return ["rag", "no-sharing"].map((name) => ({
    name,
    describe: name,
    qps: [8, 16],
    run: (qps: number) => ({
      arrivals: [{ atMs: 0, request: { id: `${name} seed ${c.seed} ${c.profile} @ ${qps}` } }],
    }),
  })) as unknown as Workload[];
}

const idOf = (w: Workload, qps: number) =>
  (w.run(qps).arrivals[0] as unknown as { request: { id: string } }).request.id;

/** SeededWorkloads over fakeWorkloads, recording the seed of every build. */
function recording(): { builds: number[]; seeded: SeededWorkloads } {
  const builds: number[] = [];
  const seeded = new SeededWorkloads((c) => {
    builds.push(c.seed);
    return fakeWorkloads(c);
  });
  return { builds, seeded };
}

describe("a run's workload", () => {
  it("takes its own seed's and profile's arrivals, whichever seed's build named it", () => {
    const { builds, seeded } = recording();
    const named = fakeWorkloads(benchConfig(true, 108, 50, "h200-measured"))[0] as Workload;
    const w = seeded.of(benchConfig(true, 101, 50, "h100-derived"), named);
    expect(w.name).toBe("rag");
    expect(w.qps).toEqual([8, 16]);
    expect(builds).toEqual([]); // a row read back never builds
    expect(idOf(w, 16)).toBe("rag seed 101 h100-derived @ 16");
    // Once per seed and profile while the caller stays on it.
    expect(idOf(seeded.of(benchConfig(true, 101, 50, "h100-derived"), named), 8)).toBe(
      "rag seed 101 h100-derived @ 8",
    );
    expect(builds).toEqual([101]);
    expect(idOf(seeded.of(benchConfig(true, 102, 50, "h100-derived"), named), 8)).toBe(
      "rag seed 102 h100-derived @ 8",
    );
    expect(builds).toEqual([101, 102]);
  });

  it("keeps only the latest seed's build (eight full-size builds outgrow the heap)", () => {
    const { builds, seeded } = recording();
    const named = fakeWorkloads(benchConfig(true, 101, 50, "h200-measured"))[0] as Workload;
    for (const seed of [101, 102, 101])
      idOf(seeded.of(benchConfig(true, seed, 50, "h200-measured"), named), 8);
    expect(builds).toEqual([101, 102, 101]);
  });

  it("builds a seed's workloads once for the main loop and its runs alike", () => {
    const { builds, seeded } = recording();
    const c = benchConfig(true, 104, 50, "h200-measured");
    const all = seeded.all(c);
    expect(all.map((w) => w.name)).toEqual(["rag", "no-sharing"]);
    expect(idOf(seeded.of(c, all[1] as Workload), 16)).toBe("no-sharing seed 104 h200-measured @ 16");
    expect(seeded.all(c)).toBe(all);
    expect(builds).toEqual([104]);
    // Ladders name the workloads and keep no build: a run goes through of().
    const [rag] = seeded.ladders(c);
    expect(rag?.qps).toEqual([8, 16]);
    expect(() => rag?.run(8)).toThrow("rag: a run takes its seed's build");
    expect(idOf(seeded.of(c, rag as Workload), 8)).toBe("rag seed 104 h200-measured @ 8");
    expect(builds).toEqual([104]);
    // Another profile of the same seed is another build (its arrivals' costs differ).
    seeded.all(benchConfig(true, 104, 50, "h100-derived"));
    expect(builds).toEqual([104, 104]);
  });

  it("says which workload a seed's build lacks", () => {
    const seeded = new SeededWorkloads(() => []);
    const named = fakeWorkloads(benchConfig(true, 101, 50, "h200-measured"))[1] as Workload;
    expect(() => seeded.of(benchConfig(true, 103, 50, "h200-measured"), named).run(8)).toThrow(
      "no workload no-sharing for seed 103",
    );
  });
});
