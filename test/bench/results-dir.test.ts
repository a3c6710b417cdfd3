import { describe, expect, it } from "vitest";
import { RESULTS_DIR, resultsDir } from "../../bench/lib/results.ts";

describe("resultsDir: where a bench writes its results", () => {
  it("is bench/results/ unless --out names another directory", () => {
    expect(resultsDir(["node", "bench.ts", "--quick"])).toBe(RESULTS_DIR);
    expect(resultsDir(["node", "bench.ts", "--out=/tmp/x", "--ranks=400"])).toBe("/tmp/x");
    expect(resultsDir(["node", "bench.ts", "--out", "/tmp/y"])).toBe("/tmp/y");
  });

  it("refuses --out without a directory rather than writing over the committed results", () => {
    expect(() => resultsDir(["node", "bench.ts", "--out"])).toThrow(/--out needs a directory/);
    expect(() => resultsDir(["node", "bench.ts", "--out", "--quick"])).toThrow(/--out needs a directory/);
  });
});
