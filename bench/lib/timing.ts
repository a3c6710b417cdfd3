// Timing helpers shared by the benches. Numbers are reported, never asserted.

export interface Percentiles {
  p50us: number;
  p99us: number;
}

/** Runs fn repeatedly for `ms` after a warm-up; per-call times in µs. */
export function sample(ms: number, fn: () => void, warmup = 200): Percentiles {
  for (let i = 0; i < warmup; i++) fn();
  const times: number[] = [];
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const t0 = process.hrtime.bigint();
    fn();
    times.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  times.sort((a, b) => a - b);
  const at = (q: number): number => times[Math.min(times.length - 1, Math.floor(q * times.length))] as number;
  return { p50us: at(0.5), p99us: at(0.99) };
}

/** Bytes per second of fn over `bytes` bytes, looping for `ms`. */
export function throughput(ms: number, bytes: number, fn: () => void): number {
  for (let i = 0; i < 20; i++) fn();
  let n = 0;
  const t0 = performance.now();
  let t = t0;
  while (t - t0 < ms) {
    for (let i = 0; i < 10; i++) fn();
    n += 10;
    t = performance.now();
  }
  return (n * bytes) / ((t - t0) / 1000);
}
