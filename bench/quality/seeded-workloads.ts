// Workloads by seed, built only when a run is measured: the main loop over seeds, the
// sensitivity runs, the one-gateway runs where kvroute trails. A workload's arrivals come from the
// seed it was built with (config.ts workloads() reads config.seed), and a run is paired with the
// peers' runs of its own seed, so each run must use its own seed's build. Building a seed's
// workloads tokenizes every prompt (~20 s at full size), so it happens only when a run is
// measured; a run read back from the rows file needs only the name and the ladder, which do not
// depend on the seed. Only the latest seed's build is kept: a full-size build holds every
// tokenized prompt, and callers go seed by seed.
import type { BenchConfig } from "./config.ts";
import type { Workload } from "./workloads/types.ts";

export class SeededWorkloads {
  /** The latest build and the profile and seed it was made for. */
  private latest: { key: string; workloads: Workload[] } | undefined;

  constructor(private readonly build: (c: BenchConfig) => Workload[]) {}

  /**
   * `c`'s seed's workloads as names, descriptions and ladders only, which depend on no seed: what
   * a loop over the points and the report need. Holding them keeps no build (its tokenized
   * prompts) alive; a run goes through of().
   */
  ladders(c: BenchConfig): Workload[] {
    return this.all(c).map(({ name, describe, qps }) => ({
      name,
      describe,
      qps,
      run: () => {
        throw new Error(`${name}: a run takes its seed's build (SeededWorkloads.of)`);
      },
    }));
  }

  /** `named` (any seed's build of the workload) whose runs take `c`'s seed's arrivals. */
  of(c: BenchConfig, named: Workload): Workload {
    return {
      ...named,
      run: (qps) => {
        const w = this.all(c).find((x) => x.name === named.name);
        if (w === undefined) throw new Error(`no workload ${named.name} for seed ${c.seed}`);
        return w.run(qps);
      },
    };
  }

  /** `c`'s seed's whole build (kept as the latest, so runs of it do not build it again). */
  all(c: BenchConfig): Workload[] {
    const key = `${c.profile}\u0000${c.seed}`;
    if (this.latest?.key !== key) {
      this.latest = undefined; // before building: the old build must be collectable while this one grows
      this.latest = { key, workloads: this.build(c) };
    }
    return this.latest.workloads;
  }
}
