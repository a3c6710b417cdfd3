// Fits the simulator's step-time model to one engine step of an 8B model measured on an NVIDIA
// H200 (bench/gpu/*.jsonl, copied from the calibration run described in docs/simulator.md) in
// two forms, and reports each form's error per measured row:
//   additive  step = a + p·prefill + q·pairs + d·decodes + k·context
//   roofline  step = max(W, t·(prefill + decodes)) + q·pairs + k·context
// (the roofline's rows share the GEMMs: below W/t rows a step is bound by reading the weights,
// above it by their compute). Each form is fitted by least squares on relative error (rows span
// 5 ms to 535 ms, so an absolute fit would ignore the decode rows); the roofline's two-piece
// max is fitted by scanning t and solving the rest linearly at each t. Pure: rows in, fit out.
// The solver is a few lines of normal equations for at most five unknowns, not worth a
// dependency.

/** One measured step, reduced to the work terms the simulator charges. */
export interface MeasuredStep {
  label: string;
  prefillTokens: number;
  /** Attention pairs of the prefill: n·c + n(n−1)/2. */
  pairs: number;
  decodeSeqs: number;
  /** Σ context tokens the decoding sequences read (B·C). */
  contextTokens: number;
  ms: number;
  /** Kept out of the fit (a PyTorch artefact vLLM's kernels do not have); still reported. */
  excluded?: string;
}

/** Reads the calibration rows (one JSON object a line) into steps. */
export function measuredSteps(jsonl: readonly string[]): MeasuredStep[] {
  const steps: MeasuredStep[] = [];
  for (const text of jsonl) {
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      const r = JSON.parse(line) as Record<string, number | string>;
      const n = Number(r.n ?? 0);
      const c = Number(r.c ?? 0);
      const B = Number(r.B ?? 0);
      const C = Number(r.C ?? 0);
      if (r.kind === "decode") {
        steps.push({
          label: `decode B=${B} C=${C}`,
          prefillTokens: 0,
          pairs: 0,
          decodeSeqs: B,
          contextTokens: B * C,
          ms: Number(r.ms),
          // PyTorch has no split-KV decode kernel: one sequence reads its KV at 0.3 TB/s.
          excluded: B === 1 && C > 16 ? "B = 1 reads KV without split-KV (PyTorch only)" : undefined,
        });
      } else if (r.kind === "prefill") {
        steps.push({
          label: `prefill n=${n} c=${c}`,
          prefillTokens: n,
          pairs: n * c + (n * (n - 1)) / 2,
          decodeSeqs: 0,
          contextTokens: 0,
          ms: Number(r.ms),
          // PyTorch's lower-right causal path after a cached prefix is 2× cuDNN's causal kernel.
          excluded: c > 0 ? "attention after a cached prefix on PyTorch's slow path" : undefined,
        });
      } else if (r.kind === "mixed") {
        steps.push({
          label: `mixed n=${n} + B=${B} C=${C}`,
          prefillTokens: n,
          pairs: (n * (n - 1)) / 2,
          decodeSeqs: B,
          contextTokens: B * C,
          ms: Number(r.mixed_ms),
        });
      }
    }
  }
  return steps;
}

export interface AdditiveFit {
  form: "additive";
  stepOverheadMs: number;
  prefillPerTokenMs: number;
  prefillAttentionPerPairMs: number;
  decodePerSeqMs: number;
  kvReadPerTokenMs: number;
}

export interface RooflineFit {
  form: "roofline";
  /** W: the weights read once per step. */
  stepOverheadMs: number;
  /** t: the GEMMs' compute per row (a prefill token or a decoding sequence). */
  rowComputeMs: number;
  prefillAttentionPerPairMs: number;
  kvReadPerTokenMs: number;
}

export type StepFit = AdditiveFit | RooflineFit;

export function predictMs(fit: StepFit, s: MeasuredStep): number {
  const attention = s.pairs * fit.prefillAttentionPerPairMs + s.contextTokens * fit.kvReadPerTokenMs;
  if (fit.form === "additive")
    return (
      fit.stepOverheadMs +
      s.prefillTokens * fit.prefillPerTokenMs +
      s.decodeSeqs * fit.decodePerSeqMs +
      attention
    );
  return Math.max(fit.stepOverheadMs, (s.prefillTokens + s.decodeSeqs) * fit.rowComputeMs) + attention;
}

/** Solves A·x = b (square, small) by Gaussian elimination with partial pivoting. */
function solve(a: number[][], b: number[]): number[] {
  const n = b.length;
  const m = a.map((row, i) => [...row, b[i] as number]);
  for (let col = 0; col < n; col++) {
    let pivot = col;
    for (let r = col + 1; r < n; r++)
      if (Math.abs((m[r] as number[])[col] as number) > Math.abs((m[pivot] as number[])[col] as number))
        pivot = r;
    [m[col], m[pivot]] = [m[pivot] as number[], m[col] as number[]];
    const p = m[col] as number[];
    for (let r = 0; r < n; r++) {
      if (r === col) continue;
      const row = m[r] as number[];
      const f = (row[col] as number) / (p[col] as number);
      for (let c = col; c <= n; c++) row[c] = (row[c] as number) - f * (p[c] as number);
    }
  }
  return m.map((row, i) => (row[n] as number) / (row[i] as number));
}

/** Least squares on relative error: minimises Σ ((x·f(s) − y) / y)² over the rows. */
function relativeLeastSquares(features: number[][], ys: number[], scales: number[] = ys): number[] {
  const k = (features[0] as number[]).length;
  const ata = Array.from({ length: k }, () => new Array<number>(k).fill(0));
  const atb = new Array<number>(k).fill(0);
  features.forEach((f, i) => {
    const w = 1 / (scales[i] as number) ** 2;
    for (let r = 0; r < k; r++) {
      atb[r] = (atb[r] as number) + w * (f[r] as number) * (ys[i] as number);
      for (let c = 0; c < k; c++)
        (ata[r] as number[])[c] =
          ((ata[r] as number[])[c] as number) + w * (f[r] as number) * (f[c] as number);
    }
  });
  return solve(ata, atb);
}

export function fitAdditive(steps: readonly MeasuredStep[]): AdditiveFit {
  const used = steps.filter((s) => s.excluded === undefined);
  const [a, p, q, d, k] = relativeLeastSquares(
    used.map((s) => [1, s.prefillTokens, s.pairs, s.decodeSeqs, s.contextTokens]),
    used.map((s) => s.ms),
  ) as [number, number, number, number, number];
  return {
    form: "additive",
    stepOverheadMs: a,
    prefillPerTokenMs: p,
    prefillAttentionPerPairMs: q,
    decodePerSeqMs: d,
    kvReadPerTokenMs: k,
  };
}

/** For each row-compute t on a fine grid, the rest is linear in (W, q, k) once each row's max
 * branch is fixed by the current W; a few rounds settle the branch. The best t wins. */
export function fitRoofline(steps: readonly MeasuredStep[]): RooflineFit {
  const used = steps.filter((s) => s.excluded === undefined);
  let best: RooflineFit | undefined;
  let bestErr = Number.POSITIVE_INFINITY;
  for (let tUs = 5; tUs <= 60; tUs += 0.05) {
    const t = tUs / 1000;
    let w = 5;
    let fit: RooflineFit | undefined;
    for (let round = 0; round < 6; round++) {
      // Rows on the compute side of the max contribute t·rows as a known offset.
      const bound = used.map((s) => (s.prefillTokens + s.decodeSeqs) * t > w);
      const ys = used.map((s, i) => s.ms - (bound[i] ? (s.prefillTokens + s.decodeSeqs) * t : 0));
      const [W, q, k] = relativeLeastSquares(
        used.map((s, i) => [bound[i] ? 0 : 1, s.pairs, s.contextTokens]),
        ys,
        used.map((s) => s.ms),
      ) as [number, number, number];
      w = W;
      fit = {
        form: "roofline",
        stepOverheadMs: W,
        rowComputeMs: t,
        prefillAttentionPerPairMs: q,
        kvReadPerTokenMs: k,
      };
    }
    const f = fit as RooflineFit;
    const err = rmsRelativeError(f, used);
    if (err < bestErr) {
      bestErr = err;
      best = f;
    }
  }
  return best as RooflineFit;
}

export function rmsRelativeError(fit: StepFit, steps: readonly MeasuredStep[]): number {
  const sq = steps.map((s) => ((predictMs(fit, s) - s.ms) / s.ms) ** 2);
  return Math.sqrt(sq.reduce((a, b) => a + b, 0) / sq.length);
}
