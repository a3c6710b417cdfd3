// How many tokens the simulated model writes before it stops (its EOS), drawn per request.
// Fixed lengths make the number of requests on a rank a perfect load proxy; real answers vary
// widely and no router sees their length in advance. A workload draws a length per request,
// submits it as the engine's stop point and sends the client's larger `max_tokens` cap in the
// body, so routers see only what a real gateway sees.
import type { Rng } from "./rng.ts";

export type OutputLengths =
  | { kind: "fixed"; tokens: number }
  | { kind: "uniform"; min: number; max: number }
  /** Log-normal with this mean and coefficient of variation, clamped to [1, max]. */
  | { kind: "lognormal"; mean: number; cv: number; max: number };

/** Standard normal draw (Box–Muller; two uniforms from `rng`). */
function normal(rng: Rng): number {
  const u = 1 - rng.next();
  const v = rng.next();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

export function sampleOutputLength(d: OutputLengths, rng: Rng): number {
  switch (d.kind) {
    case "fixed":
      return d.tokens;
    case "uniform":
      return d.min + rng.int(d.max - d.min + 1);
    case "lognormal": {
      // For a log-normal, σ² = ln(1 + cv²) and μ = ln(mean) − σ²/2 give that mean and cv.
      const s2 = Math.log(1 + d.cv * d.cv);
      const x = Math.exp(Math.log(d.mean) - s2 / 2 + Math.sqrt(s2) * normal(rng));
      return Math.min(d.max, Math.max(1, Math.round(x)));
    }
  }
}

/** The longest answer a distribution can produce (what a client would put in `max_tokens`). */
export function outputCap(d: OutputLengths): number {
  return d.kind === "fixed" ? d.tokens : d.max;
}

/** The bench's default shape around a mean: log-normal, cv 0.7, capped at 4× the mean. */
export function lognormalAround(mean: number): OutputLengths {
  return { kind: "lognormal", mean, cv: 0.7, max: Math.max(1, 4 * mean) };
}

export function describeOutputLengths(d: OutputLengths): string {
  switch (d.kind) {
    case "fixed":
      return `${d.tokens}`;
    case "uniform":
      return `uniform ${d.min}–${d.max}`;
    case "lognormal":
      return `log-normal mean ${d.mean}, cv ${d.cv}, ≤ ${d.max}`;
  }
}
