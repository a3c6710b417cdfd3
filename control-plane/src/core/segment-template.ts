// The segment template: literal strings derived from a model's chat template that let the
// filter render a chat request into the engine's exact prompt bytes without Jinja.
// Semantics: docs/wire-format.md §2. Produced by control-plane/src/tokens/, consumed by the
// routing core (filter/core) through its binary encoding.

export interface RoleSegments {
  /** Written before the message content. */
  open: string;
  /** Written after the message content. */
  close: string;
}

export type TemplateRole = "system" | "user" | "assistant" | "tool" | "developer";

export interface SegmentTemplate {
  /** Written once at the start of every stream (e.g. a BOS the template itself writes). */
  prefix: string;
  /** Roles the template renders as open ‖ content ‖ close. A missing role is inexpressible. */
  roles: Partial<Record<TemplateRole, RoleSegments>>;
  /** Appended after the last message (vLLM's default add_generation_prompt=true). */
  generationPrompt: string;
  /** When non-null, rendered as a system message if messages[0] is not a system message. */
  defaultSystem: string | null;
  /** Jinja `| trim` on content, with Python str.strip()'s whitespace set. */
  trimContent: boolean;
  /** "qwen3": assistant content before the last user turn keeps only the text after the last `</think>`, lstrip("\n"). */
  assistantHistoryThink: "none" | "qwen3";
}
