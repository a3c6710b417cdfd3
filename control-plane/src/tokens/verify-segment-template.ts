// Checks a segment template against the model's real chat template: many conversations are
// rendered by Jinja and by the routing core's renderer (the code the filter runs), and the
// bytes must agree — EXACT streams equal, PARTIAL streams a prefix. The renderer is a
// parameter so the core's Wasm export is what gets verified, never a re-implementation.
import type { SegmentTemplate, TemplateRole } from "../core/segment-template.ts";
import { type Message, randomContent, randomConversation, seededRandom } from "./random-conversations.ts";

export type RenderStatus = "exact" | "partial" | "none";

/** The routing core's chat renderer (control-plane/src/core/kvroute-core.ts `renderChat`). */
export type CoreRenderChat = (
  template: SegmentTemplate,
  messages: Message[],
  options?: { addGenerationPrompt?: boolean },
) => { status: RenderStatus; stream: Uint8Array };

/** The model's chat template, as vLLM renders it (add_generation_prompt defaults to true). */
export type ReferenceRender = (messages: Message[], addGenerationPrompt: boolean) => string;

export interface VerifyOptions {
  seed?: number;
  /** Random conversations on top of the structured ones (all role sequences up to length 3). */
  conversations?: number;
  /** Below this share of EXACT renders the template is useless even if never wrong. */
  minExactFraction?: number;
}

export interface VerifyStats {
  exact: number;
  partial: number;
  none: number;
  /** Conversations the chat template itself rejects (raise_exception): the engine answers 400. */
  rejected: number;
}

export type VerifyResult =
  | { ok: true; stats: VerifyStats }
  | { ok: false; reason: string; conversation?: Message[]; stats: VerifyStats };

const ROLES: readonly string[] = ["system", "user", "assistant", "tool", "developer"];
const EXTRA_ROLES: readonly TemplateRole[] = ["tool", "developer"];
const encoder = new TextEncoder();

/** Every role sequence of length 1..3: catches templates that merge or reorder neighbours. */
function* structured(rand: () => number): Generator<Message[]> {
  const sequences: string[][] = [[]];
  for (let len = 1; len <= 3; len++) {
    for (const seq of sequences.filter((s) => s.length === len - 1)) {
      for (const role of ROLES) {
        const next = [...seq, role];
        sequences.push(next);
        yield next.map((r) => ({ role: r, content: randomContent(rand, { think: r === "assistant" }) }));
      }
    }
  }
}

function excerpt(bytes: Uint8Array, at: number): string {
  const from = Math.max(0, at - 24);
  return JSON.stringify(Buffer.from(bytes.subarray(from, at + 24)).toString("utf8"));
}

function firstDifference(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return n;
}

/**
 * Compares one conversation; returns a reason when the core's stream is wrong. `generation`
 * false sends add_generation_prompt=false explicitly (a default request omits the field).
 */
function check(
  template: SegmentTemplate,
  messages: Message[],
  generation: boolean,
  reference: ReferenceRender,
  core: CoreRenderChat,
  stats: VerifyStats,
): string | null {
  let text: string;
  try {
    text = reference(messages, generation);
  } catch {
    stats.rejected++;
    return null;
  }
  const want = encoder.encode(text);
  const got = generation
    ? core(template, messages)
    : core(template, messages, { addGenerationPrompt: false });
  stats[got.status]++;
  const at = firstDifference(want, got.stream);
  if (got.status === "exact" && (at !== want.length || got.stream.length !== want.length)) {
    return `EXACT stream differs from the chat template at byte ${at}: template ${excerpt(want, at)}, core ${excerpt(got.stream, at)}`;
  }
  if (got.status === "partial" && at !== got.stream.length) {
    return `PARTIAL stream is not a prefix of the chat template's output (byte ${at}): template ${excerpt(want, at)}, core ${excerpt(got.stream, at)}`;
  }
  return null;
}

export function verifySegmentTemplate(
  template: SegmentTemplate,
  reference: ReferenceRender,
  core: CoreRenderChat,
  options: VerifyOptions = {},
): VerifyResult {
  const rand = seededRandom(options.seed ?? 0x6b76);
  const stats: VerifyStats = { exact: 0, partial: 0, none: 0, rejected: 0 };
  const conversations: Iterable<Message[]>[] = [
    structured(rand),
    (function* () {
      for (let i = 0; i < (options.conversations ?? 400); i++) yield randomConversation(rand, EXTRA_ROLES);
    })(),
  ];
  let n = 0;
  for (const source of conversations) {
    for (const messages of source) {
      // Every fourth conversation without the generation prompt: that path must be exact too.
      const generation = n++ % 4 !== 3;
      const reason = check(template, messages, generation, reference, core, stats);
      if (reason !== null) {
        const mode = generation ? "" : " (add_generation_prompt=false)";
        return { ok: false, reason: reason + mode, conversation: messages, stats };
      }
    }
  }
  const rendered = stats.exact + stats.partial + stats.none;
  const minExact = options.minExactFraction ?? 0.2;
  if (rendered === 0 || stats.exact < rendered * minExact) {
    return {
      ok: false,
      reason: `only ${stats.exact} of ${rendered} conversations rendered exactly (minimum ${minExact * 100}%)`,
      stats,
    };
  }
  return { ok: true, stats };
}
