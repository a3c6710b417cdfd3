// Binary encoding of a SegmentTemplate, as the filter receives it in its configuration
// (docs/wire-format.md §2.1). The control plane only writes it; the routing core's decoder
// (filter/core/segment-template.ts) is the one reader, and the tests round-trip through it.
import type { SegmentTemplate, TemplateRole } from "./segment-template.ts";

export const TEMPLATE_MAGIC = Uint8Array.of(0x4b, 0x56, 0x53, 0x54); // "KVST"
export const TEMPLATE_VERSION = 1;
/** Limits the decoder enforces; the encoder refuses to write past them. */
export const TEMPLATE_LIMITS = { roles: 16, roleName: 32, string: 1 << 20, total: 1 << 24 } as const;

const FLAG_TRIM_CONTENT = 1;
const FLAG_DEFAULT_SYSTEM = 2;
const THINK_CODES = { none: 0, qwen3: 1 } as const;
/** Roles are written in this order so equal templates encode to equal bytes. */
const ROLE_ORDER: readonly TemplateRole[] = ["system", "user", "assistant", "tool", "developer"];

export class SegmentTemplateEncodeError extends Error {}

export function encodeSegmentTemplate(t: SegmentTemplate): Uint8Array {
  const utf8 = new TextEncoder();
  const strings: Uint8Array[] = [];
  const add = (what: string, s: string, max: number): void => {
    const b = utf8.encode(s);
    if (b.length > max) throw new SegmentTemplateEncodeError(`${what} is ${b.length} bytes (max ${max})`);
    strings.push(b);
  };
  add("prefix", t.prefix, TEMPLATE_LIMITS.string);
  add("generationPrompt", t.generationPrompt, TEMPLATE_LIMITS.string);
  if (t.defaultSystem !== null) add("defaultSystem", t.defaultSystem, TEMPLATE_LIMITS.string);
  let roleCount = 0;
  for (const name of Object.keys(t.roles)) {
    if (!ROLE_ORDER.includes(name as TemplateRole))
      throw new SegmentTemplateEncodeError(`unknown role ${name}`);
  }
  for (const role of ROLE_ORDER) {
    const seg = t.roles[role];
    if (seg === undefined) continue;
    add("role name", role, TEMPLATE_LIMITS.roleName);
    add(`roles.${role}.open`, seg.open, TEMPLATE_LIMITS.string);
    add(`roles.${role}.close`, seg.close, TEMPLATE_LIMITS.string);
    roleCount++;
  }
  const think = THINK_CODES[t.assistantHistoryThink];
  if (think === undefined)
    throw new SegmentTemplateEncodeError(`unknown assistantHistoryThink ${t.assistantHistoryThink}`);
  const total = 8 + strings.reduce((n, s) => n + 4 + s.length, 0);
  if (total > TEMPLATE_LIMITS.total) throw new SegmentTemplateEncodeError(`template is ${total} bytes`);
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  out.set(TEMPLATE_MAGIC, 0);
  out[4] = TEMPLATE_VERSION;
  out[5] = (t.trimContent ? FLAG_TRIM_CONTENT : 0) | (t.defaultSystem !== null ? FLAG_DEFAULT_SYSTEM : 0);
  out[6] = think;
  out[7] = roleCount;
  let pos = 8;
  for (const s of strings) {
    view.setUint32(pos, s.length, true);
    out.set(s, pos + 4);
    pos += 4 + s.length;
  }
  return out;
}
