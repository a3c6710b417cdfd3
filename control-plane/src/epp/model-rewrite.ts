// Model-name rewrites as llm-d-router applies them (pkg/epp/requestcontrol/director.go,
// modelRewriteIfNeeded / applyWeightedModelRewrite; pkg/epp/datastore/modelrewritestore.go):
// the target model starts as the client's `x-llm-d-model-name-rewrite` header (or the deprecated
// `x-gateway-model-name-rewrite`), else the body's model; an InferenceModelRewrite rule for the
// body's model then decides — an exact match over a generic rule (no `matches`), the oldest
// resource first, the first rule of a resource — and picks one of its targets by weight. The
// request body's `model` becomes the target before the filter routes it (so the target's pool
// and adapters are the ones chosen); the response's `"model":"<target>"` is written back as the
// client's name.
import type { Pairs } from "./header-mutation.ts";

/** The reference's header, then its deprecated alias. */
export const REWRITE_HEADERS: readonly string[] = [
  "x-llm-d-model-name-rewrite",
  "x-gateway-model-name-rewrite",
];

/** llm-d.ai/v1alpha2 InferenceModelRewrite, the fields the picker reads (apix/v1alpha2). */
export interface InferenceModelRewrite {
  metadata?: { name?: string; creationTimestamp?: string };
  spec?: {
    poolRef?: { group?: string; kind?: string; name?: string };
    rules?: Array<{
      matches?: Array<{ model?: { type?: string; value?: string } }>;
      targets?: Array<{ weight?: number; modelRewrite?: string }>;
    }>;
  };
}

type Rule = NonNullable<NonNullable<InferenceModelRewrite["spec"]>["rules"]>[number];
type Target = NonNullable<Rule["targets"]>[number];

interface StoredRule {
  rule: Rule;
  created: number;
  parent: string;
}

/** The rewrite rules of one pool, by precedence. */
export class ModelRewrites {
  private exact = new Map<string, StoredRule[]>();
  private generic: StoredRule[] = [];

  constructor(private readonly random: () => number = Math.random) {}

  get size(): number {
    return this.exact.size + this.generic.length;
  }

  /** Replaces every rule with those of `objects` (the pool's InferenceModelRewrites). */
  replace(objects: Iterable<InferenceModelRewrite>): void {
    this.exact = new Map();
    this.generic = [];
    for (const o of objects) {
      const created = Date.parse(o.metadata?.creationTimestamp ?? "") || 0;
      const parent = o.metadata?.name ?? "";
      for (const rule of o.spec?.rules ?? []) {
        const stored = { rule, created, parent };
        const models = (rule.matches ?? []).map((m) => m.model?.value).filter((v) => typeof v === "string");
        if ((rule.matches ?? []).length === 0) this.generic.push(stored);
        for (const model of new Set(models)) {
          const list = this.exact.get(model) ?? [];
          list.push(stored);
          this.exact.set(model, list);
        }
      }
    }
    // Oldest resource first; a stable sort keeps a resource's own rules in list order.
    const byAge = (a: StoredRule, b: StoredRule) => a.created - b.created || a.parent.localeCompare(b.parent);
    this.generic.sort(byAge);
    for (const list of this.exact.values()) list.sort(byAge);
  }

  /** The rule for a model: the oldest exact match, else the oldest generic rule; null if none. */
  ruleFor(model: string): Rule | null {
    return this.exact.get(model)?.[0]?.rule ?? this.generic[0]?.rule ?? null;
  }

  /** Whether a request with these headers may be rewritten (a rewrite header, or any rule). */
  applies(headers: Pairs): boolean {
    return this.size > 0 || rewriteHeader(headers) !== null;
  }

  /** The model a request is sent to: header, then the rule's weighted pick; the body's otherwise. */
  targetFor(headers: Pairs, incoming: string): string {
    let target = rewriteHeader(headers) ?? incoming;
    const rule = this.ruleFor(incoming);
    if (rule !== null) target = pickTarget(rule.targets ?? [], this.random) ?? target;
    return target;
  }
}

/** The first rewrite header present (its first value), or null. */
export function rewriteHeader(headers: Pairs): string | null {
  for (const name of REWRITE_HEADERS) {
    const v = headers.find(([k]) => k === name)?.[1];
    if (v !== undefined && v !== "") return v;
  }
  return null;
}

/**
 * A target by weight (weight / sum of weights); without weights, uniformly. As the reference, a
 * target without a weight is never picked when others have one.
 */
export function pickTarget(targets: readonly Target[], random: () => number): string | null {
  const named = targets.filter((t) => typeof t.modelRewrite === "string" && t.modelRewrite !== "");
  if (named.length === 0) return null;
  const total = named.reduce((n, t) => n + (t.weight ?? 0), 0);
  if (total <= 0) return named[Math.floor(random() * named.length)]?.modelRewrite ?? null;
  let at = random() * total;
  for (const t of named) {
    at -= t.weight ?? 0;
    if (at < 0) return t.modelRewrite ?? null;
  }
  return named.at(-1)?.modelRewrite ?? null;
}

/**
 * The request body with `model` set to the target, or null when it is not rewritten (not a JSON
 * object with a string model, or the target is that model already).
 */
export function rewriteRequestBody(
  body: Buffer,
  targetFor: (incoming: string) => string,
): { body: Buffer; incoming: string; target: string } | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    return null;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return null;
  const obj = parsed as Record<string, unknown>;
  if (typeof obj.model !== "string") return null;
  const incoming = obj.model;
  const target = targetFor(incoming);
  if (target === incoming) return null;
  obj.model = target;
  return { body: Buffer.from(JSON.stringify(obj)), incoming, target };
}

/**
 * A response chunk with the target's `"model":"…"` written back as the client's name (both with
 * and without a space after the colon, as the reference); the chunk itself when absent.
 */
export function restoreModelName(chunk: Buffer, names: { incoming: string; target: string }): Buffer {
  let out = chunk;
  for (const sep of [":", ": "]) {
    const from = Buffer.from(`"model"${sep}${JSON.stringify(names.target)}`);
    if (out.indexOf(from) < 0) continue;
    const to = Buffer.from(`"model"${sep}${JSON.stringify(names.incoming)}`);
    const parts: Buffer[] = [];
    let at = 0;
    for (let i = out.indexOf(from); i >= 0; i = out.indexOf(from, at)) {
      parts.push(out.subarray(at, i), to);
      at = i + from.length;
    }
    parts.push(out.subarray(at));
    out = Buffer.concat(parts);
  }
  return out;
}
