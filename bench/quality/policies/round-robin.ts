// Round robin over all ranks: the baseline of SGLang's and Dynamo's published router
// comparisons (REFERENCE §6).
import type { PolicyFactory } from "./types.ts";

export const roundRobinPolicy: PolicyFactory = {
  name: "round-robin",
  describe: "round robin over the 8 ranks",
  create(ctx) {
    let next = 0;
    return {
      choose: () => {
        const r = next;
        next = (next + 1) % ctx.ranks;
        return r;
      },
    };
  },
};
