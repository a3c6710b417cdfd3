// Writes the golden vectors in test/fixtures/core/ from references independent of the core:
// XXH64 from xxhash-wasm (the reference C code compiled to Wasm), chunk chains composed here from
// the wire-format §3 formula over that XXH64, renders from the models' real Jinja templates.
// Run once when adding vectors (`npx tsx test/core/generate-fixtures.ts`); the files are then
// pinned forever — regenerating must not change an existing value (wire-format: a protocol bump).
import { writeFileSync } from "node:fs";
import xxhash from "xxhash-wasm";
import { seededRandom } from "../../control-plane/src/tokens/random-conversations.ts";
import { hex, jinjaRenderer, utf8 } from "./helpers.ts";

const out = new URL("../fixtures/core/", import.meta.url);
const { h64Raw } = await xxhash();
const rand = seededRandom(20260101);

function bytesOf(n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(rand() * 256);
  return b;
}
const toHex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

// ---- XXH64 ----
// Published values (xxHash's and python-xxhash's documentation) and a sweep over every length
// up to 100 (all tail paths) plus long inputs, with assorted seeds including ones ≥ 2^63.
const published = [
  { utf8: "", seed: "0x0000000000000000", hash: "0xef46db3751d8e999" },
  { utf8: "a", seed: "0x0000000000000000", hash: "0xd24ec4f1a98c6e5b" },
  { utf8: "abc", seed: "0x0000000000000000", hash: "0x44bc2cf5ad770999" },
  { utf8: "Nobody inspects the spammish repetition", seed: "0x0000000000000000", hash: "0xfbcea83c8a378bf1" },
];
for (const v of published) {
  const got = hex(h64Raw(utf8.encode(v.utf8), BigInt(v.seed)));
  if (got !== v.hash)
    throw new Error(`xxhash-wasm disagrees with the published value for ${JSON.stringify(v)}: ${got}`);
}
const seeds = [0n, 1n, 0x9e3779b97f4a7c15n, 0xffffffffffffffffn, 0x8000000000000000n];
const swept: Array<{ hex: string; seed: string; hash: string }> = [];
for (let n = 0; n <= 100; n++) {
  const b = bytesOf(n);
  const seed = seeds[n % seeds.length] as bigint;
  swept.push({ hex: toHex(b), seed: hex(seed), hash: hex(h64Raw(b, seed)) });
}
for (const n of [127, 128, 129, 255, 256, 1000, 4096 + 7]) {
  const b = bytesOf(n);
  const seed = BigInt.asUintN(64, BigInt(Math.floor(rand() * 2 ** 53)) * 0x10001n);
  swept.push({ hex: toHex(b), seed: hex(seed), hash: hex(h64Raw(b, seed)) });
}
writeFileSync(new URL("xxh64.json", out), `${JSON.stringify({ published, swept }, null, 2)}\n`);

// ---- chunk chains ----
function chain(model: string, lora: string, salt: string, stream: Uint8Array, c: number): string[] {
  const key = utf8.encode(`${model}\0${lora}\0${salt}`);
  let h = h64Raw(key, 0n);
  const hashes = [hex(h)];
  for (let k = 0; (k + 1) * c <= stream.length; k++) {
    h = h64Raw(stream.subarray(k * c, (k + 1) * c), h);
    hashes.push(hex(h));
  }
  return hashes;
}
const chatStream = jinjaRenderer("qwen3").render([
  { role: "system", content: "You are a helpful assistant." },
  { role: "user", content: "Summarise the plot of Hamlet in three sentences, please. 🎭 Ünïcödé welcome." },
]);
const chunkCases = [
  { model: "Qwen/Qwen3-8B", lora: "", cacheSalt: "", chunkSize: 128, stream: chatStream },
  { model: "Qwen/Qwen3-8B", lora: "", cacheSalt: "", chunkSize: 16, stream: chatStream },
  { model: "Qwen/Qwen3-8B", lora: "sql-adapter", cacheSalt: "", chunkSize: 64, stream: chatStream },
  { model: "Qwen/Qwen3-8B", lora: "", cacheSalt: "tenant-42", chunkSize: 64, stream: chatStream },
  { model: "meta-llama/Llama-3.1-8B-Instruct", lora: "a", cacheSalt: "s", chunkSize: 1, stream: "abcdefgh" },
  { model: "m", lora: "", cacheSalt: "", chunkSize: 256, stream: "short: no complete chunk" },
  { model: "", lora: "", cacheSalt: "", chunkSize: 7, stream: "x".repeat(50) },
].map((c) => ({ ...c, hashes: chain(c.model, c.lora, c.cacheSalt, utf8.encode(c.stream), c.chunkSize) }));
writeFileSync(
  new URL("chunks.json", out),
  `${JSON.stringify({ note: "hashes[0] is h0; hashes[k] the k-th complete chunk", cases: chunkCases }, null, 2)}\n`,
);

// ---- renders of real conversations through the real Jinja templates ----
const conversations = [
  [{ role: "user", content: "What is the capital of France?" }],
  [
    { role: "system", content: "You are a concise assistant. Answer in one line." },
    { role: "user", content: "Give me a haiku about the sea." },
    {
      role: "assistant",
      content: "Waves fold into foam,\nsalt wind carries gull voices,\nthe tide keeps its time.",
    },
    { role: "user", content: "Now one about mountains." },
  ],
  [
    { role: "user", content: "  Translate 'good morning' to Japanese.  \n" },
    {
      role: "assistant",
      content: "<think>\nSimple greeting.\n</think>\n\nおはようございます (ohayō gozaimasu)",
    },
    { role: "user", content: "And in Russian? 🇷🇺" },
  ],
  [
    { role: "user", content: 'Parse this JSON: {"a": [1, 2, {"b": "c\\"d"}]}' },
    { role: "assistant", content: "\tIt is an object with key a.\u00a0" },
    { role: "user", content: "" },
  ],
];
const renders: unknown[] = [];
for (const model of ["qwen3", "llama3_1"] as const) {
  const jinja = jinjaRenderer(model);
  for (const messages of conversations) renders.push({ model, messages, stream: jinja.render(messages) });
}
writeFileSync(new URL("renders.json", out), `${JSON.stringify(renders, null, 2)}\n`);

// ---- strict rank headers (REFERENCE §1.1) ----
const ranks = [
  [null, "absent"],
  ["0", 0],
  ["7", 7],
  ["10", 10],
  ["4294967295", 4294967295],
  ["4294967296", "invalid"],
  ["9999999999", "invalid"],
  ["00", "invalid"],
  ["01", "invalid"],
  ["12345678901", "invalid"],
  ["", "invalid"],
  [" 3", "invalid"],
  ["3 ", "invalid"],
  ["+3", "invalid"],
  ["-1", "invalid"],
  ["1_0", "invalid"],
  ["1,2", "invalid"],
  ["3.0", "invalid"],
  ["0x1", "invalid"],
  ["١", "invalid"],
  ["３", "invalid"],
  ["3\u0000", "invalid"],
];
writeFileSync(new URL("rank-headers.json", out), `${JSON.stringify(ranks, null, 2)}\n`);
process.stdout.write("wrote test/fixtures/core/{xxh64,chunks,renders,rank-headers}.json\n");
