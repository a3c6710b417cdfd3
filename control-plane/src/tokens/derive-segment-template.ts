// Chat template → verified SegmentTemplate (DESIGN §2.2). Probing proposes the literals;
// verification against the routing core's renderer decides. A role whose messages the core
// would render wrongly is left out (such chats then render PARTIAL up to that message); if the
// core roles themselves fail, the template is "not segmentable" with the first counterexample.
import type { SegmentTemplate, TemplateRole } from "../core/segment-template.ts";
import { probeSegmentTemplate } from "./probe-segment-template.ts";
import { ChatTemplateRenderer } from "./render-chat-template.ts";
import { chatTemplateOf, type TokenizerFiles } from "./tokenizer-files.ts";
import {
  type CoreRenderChat,
  type VerifyOptions,
  type VerifyStats,
  verifySegmentTemplate,
} from "./verify-segment-template.ts";

export type DeriveResult =
  | {
      ok: true;
      template: SegmentTemplate;
      /** Roles left out of the template and why. */
      notes: string[];
      stats: VerifyStats;
    }
  | { ok: false; reason: string };

/** Roles tried one by one on top of the base (user, assistant, and system when it must stay). */
const OPTIONAL_ROLES: readonly TemplateRole[] = ["system", "tool", "developer"];

function withRoles(t: SegmentTemplate, keep: ReadonlySet<TemplateRole>): SegmentTemplate {
  const roles: SegmentTemplate["roles"] = {};
  for (const [role, seg] of Object.entries(t.roles) as Array<
    [TemplateRole, NonNullable<SegmentTemplate["roles"][TemplateRole]>]
  >) {
    if (keep.has(role)) roles[role] = seg;
  }
  return { ...t, roles };
}

/** Renders with the clock stopped at `at` (strftime_now reads `new Date()`); synchronous, so scoped. */
function renderAt(jinja: ChatTemplateRenderer, at: number): string | null {
  const RealDate = Date;
  class StoppedDate extends RealDate {
    constructor(...args: ConstructorParameters<DateConstructor> | []) {
      if (args.length === 0) super(at);
      else super(...(args as ConstructorParameters<DateConstructor>));
    }
    static override now(): number {
      return at;
    }
  }
  globalThis.Date = StoppedDate as DateConstructor;
  try {
    return jinja.render([{ role: "user", content: "x" }]);
  } catch {
    return null;
  } finally {
    globalThis.Date = RealDate;
  }
}

/**
 * Whether the output changes with the current date (Llama-3.2/3.3 write `strftime_now(...)`
 * into the system header): segments read off today would be wrong tomorrow, silently.
 */
function rendersTheDate(jinja: ChatTemplateRenderer): boolean {
  return renderAt(jinja, Date.UTC(2001, 0, 1, 12)) !== renderAt(jinja, Date.UTC(2002, 1, 2, 12));
}

/**
 * Derives and verifies from a renderer (also for templates that are not in a
 * tokenizer_config.json, e.g. one given to vLLM with --chat-template).
 */
export function deriveSegmentTemplateFromRenderer(
  jinja: ChatTemplateRenderer,
  renderChat: CoreRenderChat,
  options: VerifyOptions = {},
): DeriveResult {
  if (rendersTheDate(jinja)) {
    return { ok: false, reason: "not segmentable: the template writes the current date (strftime_now)" };
  }
  const probed = probeSegmentTemplate((messages, gen) =>
    jinja.render(messages, { addGenerationPrompt: gen }),
  );
  if (!probed.ok) return { ok: false, reason: `not segmentable: ${probed.reason}` };
  const candidate = probed.template;
  const notes = [...probed.notes];
  const reference = (messages: Parameters<typeof jinja.render>[0], addGenerationPrompt: boolean) =>
    jinja.render(messages, { addGenerationPrompt });

  const keep = new Set<TemplateRole>(["user", "assistant"]);
  // A default system message is rendered with the system segments, so they cannot be dropped.
  if (candidate.defaultSystem !== null && candidate.roles.system !== undefined) keep.add("system");
  // Correctness first, role by role; coverage (the EXACT share) is judged on the final set.
  const stepOptions = { ...options, minExactFraction: 0 };
  const result = verifySegmentTemplate(withRoles(candidate, keep), reference, renderChat, stepOptions);
  if (!result.ok) {
    const example =
      result.conversation === undefined ? "" : ` — conversation ${JSON.stringify(result.conversation)}`;
    return { ok: false, reason: `not segmentable: ${result.reason}${example}` };
  }
  for (const role of OPTIONAL_ROLES) {
    if (keep.has(role) || candidate.roles[role] === undefined) continue;
    const trial = verifySegmentTemplate(
      withRoles(candidate, new Set([...keep, role])),
      reference,
      renderChat,
      options,
    );
    if (trial.ok) {
      keep.add(role);
    } else {
      const example = trial.conversation === undefined ? "" : ` (${JSON.stringify(trial.conversation)})`;
      notes.push(`${role}: left out, ${trial.reason}${example}`);
    }
  }
  const template = withRoles(candidate, keep);
  const final = verifySegmentTemplate(template, reference, renderChat, options);
  if (!final.ok) return { ok: false, reason: `not segmentable: ${final.reason}` };
  return { ok: true, template, notes, stats: final.stats };
}

/**
 * The model's segment template from its tokenizer files, verified with `renderChat` — pass the
 * routing core's (control-plane/src/core/kvroute-core.ts), which is what the filter runs.
 */
export function deriveSegmentTemplate(
  files: TokenizerFiles,
  renderChat: CoreRenderChat,
  options: VerifyOptions = {},
): DeriveResult {
  if (chatTemplateOf(files.config) === undefined) {
    return { ok: false, reason: `not segmentable: ${files.dir}/tokenizer_config.json has no chat_template` };
  }
  return deriveSegmentTemplateFromRenderer(new ChatTemplateRenderer(files.config), renderChat, options);
}
