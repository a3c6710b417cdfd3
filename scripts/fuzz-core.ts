// Longer fuzz run of the routing core (scan + render + hash in Wasm) than the test suite's:
//   npm run fuzz -- --iterations 5000000 --seed 7
// Prints progress, the status mix, and every problem body (hex, first 300 bytes). Exit 1 on any.
import { parseArgs } from "node:util";
import { hashRequest } from "../control-plane/src/core/kvroute-core.ts";
import { BodyFuzzer, checkBody } from "../test/core/fuzz-bodies.ts";
import { segmentTemplate } from "../test/core/helpers.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "1000000" },
    seed: { type: "string", default: String(Date.now() % 1_000_000) },
    "max-problems": { type: "string", default: "20" },
  },
});
const iterations = Number(values.iterations);
const seed = Number(values.seed);
const maxProblems = Number(values["max-problems"]);
if (!Number.isInteger(iterations) || iterations < 1 || !Number.isInteger(seed)) {
  process.stderr.write("usage: fuzz-core [--iterations N] [--seed S] [--max-problems K]\n");
  process.exit(2);
}

const fuzzer = new BodyFuzzer(seed);
const templates = [segmentTemplate("qwen3"), segmentTemplate("llama3_1")] as const;
const mix = new Map<string, number>();
let problems = 0;
const started = performance.now();
process.stdout.write(`fuzzing the core: ${iterations} bodies, seed ${seed}\n`);
for (let i = 0; i < iterations; i++) {
  const body = fuzzer.next();
  const template = i & 1 ? templates[1] : templates[0];
  const problem = checkBody(body, template);
  if (problem !== null) {
    problems++;
    process.stdout.write(`#${i} ${problem}\n  ${Buffer.from(body.subarray(0, 300)).toString("hex")}\n`);
    if (problems >= maxProblems) break;
    continue;
  }
  if (i % 16 === 0) {
    const r = hashRequest(body, { endpoint: "chat", template, model: "m", chunkSize: 16 });
    const key = r.error ?? r.status;
    mix.set(key, (mix.get(key) ?? 0) + 1);
  }
  if ((i + 1) % 100_000 === 0) {
    const s = (performance.now() - started) / 1000;
    process.stdout.write(`  ${i + 1} bodies, ${s.toFixed(1)} s, ${problems} problems\n`);
  }
}
process.stdout.write(`sampled outcome mix (chat): ${JSON.stringify(Object.fromEntries(mix))}\n`);
process.stdout.write(problems === 0 ? "no problems\n" : `${problems} problem(s)\n`);
process.exit(problems === 0 ? 0 : 1);
