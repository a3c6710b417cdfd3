// Uniform random rank: the "random" line of llm-d's published comparison (REFERENCE §6).
import { mixSeed, Rng } from "../../../control-plane/sim/rng.ts";
import type { PolicyFactory } from "./types.ts";

export const randomPolicy: PolicyFactory = {
  name: "random",
  describe: "uniform random rank (seeded)",
  create(ctx) {
    const rng = new Rng(mixSeed(ctx.seed, 0x7a4d));
    return { choose: () => rng.int(ctx.ranks) };
  },
};
