// The text a tokenizer adds around a `/v1/completions` prompt (add_special_tokens=true): the
// filter writes `bosText ‖ prompt` (docs/wire-format.md §1), so bosText must be exactly the
// bytes of the special tokens the post-processor puts before the prompt. Read from
// tokenizer.json's post_processor, turned into bytes through the same id → bytes table.
import { detokenize } from "./detokenize.ts";
import { buildTokenBytesTable, type TokenBytesTable } from "./token-bytes-table.ts";

export type CompletionTextResult =
  | {
      ok: true;
      /** Written before the prompt (e.g. "<|begin_of_text|>", "<s>", or ""). */
      bosText: string;
      /** Written after it (e.g. an EOS); only ever affects the stream's last, incomplete chunk. */
      suffixText: string;
    }
  | { ok: false; reason: string };

type Json = Record<string, unknown>;

function isObject(x: unknown): x is Json {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function processors(p: unknown): Json[] {
  if (!isObject(p)) return [];
  if (p.type === "Sequence" && Array.isArray(p.processors)) return p.processors.flatMap(processors);
  return [p];
}

function textOf(table: TokenBytesTable, ids: number[], what: string): string {
  const r = detokenize(table, ids);
  if (!r.ok) throw new Error(`${what}: token id ${ids.join(",")} is not in the vocabulary`);
  return Buffer.from(r.bytes).toString("utf8");
}

function specialIds(tp: Json, name: string): number[] {
  const special = isObject(tp.special_tokens) ? tp.special_tokens[name] : undefined;
  if (!isObject(special) || !Array.isArray(special.ids)) {
    throw new Error(`TemplateProcessing names special token "${name}" without ids`);
  }
  return special.ids as number[];
}

function fromTemplateProcessing(tp: Json, table: TokenBytesTable): { bosText: string; suffixText: string } {
  const single = tp.single;
  if (!Array.isArray(single)) throw new Error("TemplateProcessing has no `single` template");
  const before: number[] = [];
  const after: number[] = [];
  let seenSequence = false;
  for (const item of single) {
    if (isObject(item) && isObject(item.Sequence)) {
      if (seenSequence) throw new Error("TemplateProcessing `single` holds the sequence twice");
      seenSequence = true;
    } else if (isObject(item) && isObject(item.SpecialToken) && typeof item.SpecialToken.id === "string") {
      (seenSequence ? after : before).push(...specialIds(tp, item.SpecialToken.id));
    } else {
      throw new Error(`unknown TemplateProcessing item ${JSON.stringify(item)}`);
    }
  }
  if (!seenSequence) throw new Error("TemplateProcessing `single` does not contain the sequence");
  return { bosText: textOf(table, before, "bos"), suffixText: textOf(table, after, "suffix") };
}

/** bosText/suffixText for completions, or why they cannot be known exactly. */
export function completionText(tokenizer: Json, table: TokenBytesTable): CompletionTextResult {
  try {
    let bosText = "";
    let suffixText = "";
    for (const p of processors(tokenizer.post_processor)) {
      if (p.type === "ByteLevel") continue; // offsets only, no tokens
      if (p.type === "TemplateProcessing") ({ bosText, suffixText } = fromTemplateProcessing(p, table));
      else if (p.type === "BertProcessing" || p.type === "RobertaProcessing") {
        const cls = p.cls as [string, number];
        const sep = p.sep as [string, number];
        bosText = textOf(table, [cls[1]], "cls");
        suffixText = textOf(table, [sep[1]], "sep");
      } else return { ok: false, reason: `unsupported post_processor ${String(p.type)}` };
    }
    return { ok: true, bosText, suffixText };
  } catch (err) {
    return { ok: false, reason: (err as Error).message };
  }
}

/**
 * Just the bosText, building the id → bytes table when none is given. "" when it cannot be
 * known (no usable vocabulary or an unreadable post-processor): a completion then renders
 * without BOS and its chunks simply miss the cache. Callers that report problems should use
 * completionText() to get the reason.
 */
export function bosTextOf(tokenizer: Json, table?: TokenBytesTable): string {
  const t = table ?? buildTokenBytesTable(tokenizer);
  if ("ok" in t) {
    if (!t.ok) return "";
    return bosTextOf(tokenizer, t.table);
  }
  const r = completionText(tokenizer, t);
  return r.ok ? r.bosText : "";
}
