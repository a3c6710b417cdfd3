// Reads a candidate SegmentTemplate off a chat template by rendering probe conversations whose
// contents are unique markers, and cutting the output at the markers: what lies between them
// is template text ("glue"). Every literal is read from where it is unambiguous:
//   close(r)  — the glue after r when r is the last message (no generation prompt);
//   open(r)   — the glue between a user turn and r, minus close(user);
//   prefix / default system — the glue before the first message, minus open(first role).
// Content transforms (trim, Qwen3's think stripping) are recognised from padded/think probes.
// Nothing here is model-specific; a template that does not fit gets a reason, not a guess.
// The candidate is only trusted after verify-segment-template.ts agrees on random chats.
import type { RoleSegments, SegmentTemplate, TemplateRole } from "../core/segment-template.ts";
import { pythonStrip } from "./python-strip.ts";
import type { Message } from "./random-conversations.ts";

/** Renders messages with the model's chat template; may throw (e.g. raise_exception). */
export type JinjaRender = (messages: Message[], addGenerationPrompt: boolean) => string;

export type ProbeResult =
  | { ok: true; template: SegmentTemplate /** roles left out, and why */; notes: string[] }
  | { ok: false; reason: string };

const marker = (i: number): string => `kVrM${i}z`;
const msg = (role: string, i: number): Message => ({ role, content: marker(i) });
// Padding with Python-only whitespace (U+0085) tells Python's strip from other trims.
const PAD = " \t\u0085\u3000\n";
const THINK = `<think>\n${marker(90)}\n</think>\n\n`;

class ProbeFailure extends Error {}

function fail(reason: string): never {
  throw new ProbeFailure(reason);
}

function describe(messages: Message[]): string {
  return messages.map((m) => m.role).join(",");
}

function renderOrFail(render: JinjaRender, messages: Message[], gen: boolean): string {
  try {
    return render(messages, gen);
  } catch (err) {
    return fail(`the template raised on [${describe(messages)}]: ${(err as Error).message}`);
  }
}

/** The template text around each message content: glue[0] ‖ c0 ‖ glue[1] ‖ … ‖ c(n-1) ‖ glue[n]. */
function glue(render: JinjaRender, messages: Message[], gen = false): string[] {
  const text = renderOrFail(render, messages, gen);
  const out: string[] = [];
  let pos = 0;
  messages.forEach((m, i) => {
    const at = text.indexOf(m.content, pos);
    if (at < 0) fail(`the content of message ${i} (${m.role}) is not written verbatim`);
    if (text.indexOf(m.content, at + 1) >= 0)
      fail(`the content of message ${i} (${m.role}) is written twice`);
    out.push(text.slice(pos, at));
    pos = at + m.content.length;
  });
  out.push(text.slice(pos));
  return out;
}

function after(text: string, head: string, what: string): string {
  if (!text.startsWith(head))
    fail(`${what}: expected ${JSON.stringify(head)} at the start of ${JSON.stringify(text)}`);
  return text.slice(head.length);
}

function same(actual: string | undefined, expected: string, what: string): void {
  if (actual !== expected)
    fail(`${what}: ${JSON.stringify(actual)} where ${JSON.stringify(expected)} was expected`);
}

interface Known {
  firstGlue: string; // glue before a lone user message
  user: RoleSegments;
  trim: (s: string) => string;
}

/** open/close of role r from [user, r] and [user, r, user]; fails if the glue is inconsistent. */
function probeRole(render: JinjaRender, role: string, k: Known): RoleSegments {
  const end = glue(render, [msg("user", 0), msg(role, 1)]);
  const close = end[2] as string;
  const mid = glue(render, [msg("user", 0), msg(role, 1), msg("user", 2)]);
  same(mid[0], k.firstGlue, `the stream start before [user,${role},user]`);
  const open = after(mid[1] as string, k.user.close, `glue between user and ${role}`);
  same(mid[2], close + k.user.open, `glue between ${role} and user`);
  same(mid[3], k.user.close, `close of the last user message after ${role}`);
  // Content must come out as T(content) for this role too.
  const padded = { role, content: PAD + marker(1) + PAD };
  const text = renderOrFail(render, [msg("user", 0), padded, msg("user", 2)], false);
  const want = k.firstGlue + marker(0) + k.user.close + open + k.trim(padded.content) + close + k.user.open;
  if (!text.startsWith(want))
    fail(`${role} content with surrounding whitespace is not rendered like user content`);
  return { open, close };
}

function probe(render: JinjaRender): { template: SegmentTemplate; notes: string[] } {
  const notes: string[] = [];
  // User alone: glue before it, its close, the generation prompt.
  const lone = glue(render, [msg("user", 0)]);
  const firstGlue = lone[0] as string;
  const userClose = lone[1] as string;
  const noGen = renderOrFail(render, [msg("user", 0)], false);
  const withGen = renderOrFail(render, [msg("user", 0)], true);
  const generationPrompt = after(withGen, noGen, "add_generation_prompt=true output");

  // Assistant and the user's open, from [user, assistant] and [user, assistant, user].
  const ua = glue(render, [msg("user", 0), msg("assistant", 1)]);
  same(ua[0], firstGlue, "the stream start before [user,assistant]");
  const assistantClose = ua[2] as string;
  const uau = glue(render, [msg("user", 0), msg("assistant", 1), msg("user", 2)]);
  same(uau[0], firstGlue, "the stream start before [user,assistant,user]");
  const assistantOpen = after(uau[1] as string, userClose, "glue between user and assistant");
  const userOpen = after(uau[2] as string, assistantClose, "glue between assistant and user");
  same(uau[3], userClose, "close of the last user message");
  if (!firstGlue.endsWith(userOpen))
    fail(`the first user message does not start with ${JSON.stringify(userOpen)}`);
  const beforeUser = firstGlue.slice(0, firstGlue.length - userOpen.length);
  const user = { open: userOpen, close: userClose };

  // Content transform: whitespace trim (Python's set) or none.
  const paddedUser = { role: "user", content: PAD + marker(0) + PAD };
  const paddedText = renderOrFail(render, [paddedUser], false);
  let trimContent: boolean;
  if (paddedText === firstGlue + paddedUser.content + userClose) trimContent = false;
  else if (paddedText === firstGlue + marker(0) + userClose) trimContent = true;
  else
    return fail("user content with surrounding whitespace is changed in a way other than Python's strip()");
  const trim = trimContent ? (s: string) => pythonStrip(s, null) : (s: string) => s;
  const known: Known = { firstGlue, user, trim };

  // Assistant history: kept, or Qwen3's "text after the last </think>, lstrip('\n')".
  const thinking = { role: "assistant", content: THINK + marker(1) };
  const history = renderOrFail(render, [msg("user", 0), thinking, msg("user", 2)], false);
  const head = firstGlue + marker(0) + userClose + assistantOpen;
  const tail = assistantClose + userOpen + marker(2) + userClose;
  if (!history.startsWith(head) || !history.endsWith(tail) || history.length < head.length + tail.length) {
    fail("an assistant turn with a <think> block changes the text around it");
  }
  const rendered = history.slice(head.length, history.length - tail.length);
  let assistantHistoryThink: SegmentTemplate["assistantHistoryThink"];
  if (rendered === trim(thinking.content)) assistantHistoryThink = "none";
  else if (
    rendered === trim(pythonStrip(thinking.content.split("</think>").at(-1) as string, "\n", "left"))
  ) {
    assistantHistoryThink = "qwen3";
  } else return fail(`assistant history content is rewritten as ${JSON.stringify(rendered)}`);

  const roles: SegmentTemplate["roles"] = { user, assistant: { open: assistantOpen, close: assistantClose } };
  let prefix = beforeUser;
  let defaultSystem: string | null = null;
  try {
    const system = probeRole(render, "system", known);
    // First-position system: prefix ‖ open(system).
    const first = glue(render, [msg("system", 0), msg("user", 1)]);
    const lead = first[0] as string;
    same(first[1], system.close + userOpen, "glue between a leading system message and user");
    if (!lead.endsWith(system.open))
      fail(`a leading system message does not start with ${JSON.stringify(system.open)}`);
    const systemPrefix = lead.slice(0, lead.length - system.open.length);
    const block = after(beforeUser, systemPrefix, "text before the first user message");
    let systemDefault: string | null = null;
    if (block !== "") {
      // Something the template writes only when there is no system message: a default system.
      const inner = after(block, system.open, "text the template adds when no system message is given");
      if (!inner.endsWith(system.close)) fail("text added without a system message is not a system block");
      systemDefault = inner.slice(0, inner.length - system.close.length);
    }
    // Only a fully consistent system role changes the prefix; otherwise system stays out.
    prefix = systemPrefix;
    defaultSystem = systemDefault;
    roles.system = system;
  } catch (err) {
    if (!(err instanceof ProbeFailure)) throw err;
    notes.push(`system: ${err.message}`);
  }
  for (const role of ["tool", "developer"] as TemplateRole[]) {
    try {
      roles[role] = probeRole(render, role, known);
    } catch (err) {
      if (!(err instanceof ProbeFailure)) throw err;
      notes.push(`${role}: ${err.message}`);
    }
  }
  return {
    template: { prefix, roles, generationPrompt, defaultSystem, trimContent, assistantHistoryThink },
    notes,
  };
}

export function probeSegmentTemplate(render: JinjaRender): ProbeResult {
  try {
    return { ok: true, ...probe(render) };
  } catch (err) {
    if (err instanceof ProbeFailure) return { ok: false, reason: err.message };
    throw err;
  }
}
