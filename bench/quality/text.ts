// Deterministic filler text of a chosen token length: words drawn from single-token
// vocabulary words, so n words tokenize to n tokens (the first word loses its leading space,
// which can cost it an extra token or two). Words are drawn with Zipf-like frequencies (log-
// uniform over the frequency-ordered list), so short common words dominate as in English and
// the text has a realistic ~4–5 bytes per token: that matters to every router that measures
// prompts in characters or bytes (GAIE's 64-character blocks, SGLang's text tree, kvroute's
// byte chunks and its bytes-per-token estimate).
import { mixSeed, Rng } from "../../control-plane/sim/rng.ts";

export function wordText(rng: Rng, tokens: number, words: readonly string[]): string {
  let s = "";
  const logN = Math.log(words.length);
  for (let i = 0; i < tokens; i++) s += words[Math.floor(Math.exp(rng.next() * logN)) - 1] as string;
  return s.slice(1);
}

/** A generator for one named piece of a workload (group g's system prompt, conversation c's
 * turn k…), independent of the order pieces are generated in. */
export function pieceRng(seed: number, ...parts: number[]): Rng {
  return new Rng(mixSeed(seed, ...parts));
}

/** Exponential gap (ms) of a Poisson process with `ratePerSecond`. */
export function exponentialMs(rng: Rng, ratePerSecond: number): number {
  return (-Math.log(1 - rng.next()) * 1000) / ratePerSecond;
}

/** Arrival times (ms) of `n` events of a Poisson process with `ratePerSecond`, from t = 0. */
export function poissonTimes(rng: Rng, n: number, ratePerSecond: number): number[] {
  const out: number[] = [];
  let t = 0;
  for (let i = 0; i < n; i++) {
    t += exponentialMs(rng, ratePerSecond);
    out.push(t);
  }
  return out;
}
