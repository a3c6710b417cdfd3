// A structural-schema validator: checks a value against a schema the way the Kubernetes API
// server treats a CRD's structural openAPIV3Schema — types (with nullable and
// x-kubernetes-int-or-string), properties, required, enum, additionalProperties, items,
// x-kubernetes-preserve-unknown-fields, formats int32/int64, string/number/list/map bounds,
// patterns, list-type set/map uniqueness, and the value-validation junctors allOf / anyOf / oneOf /
// not. A field the schema does not know is an error here (the API server would prune it silently,
// or refuse it under kubectl's default strict field validation). The schemas themselves are ours,
// written from the upstream API types (test/deploy/schemas/). CEL rules (x-kubernetes-validations)
// are not evaluated: no CEL interpreter is installed.

export interface Schema {
  type?: "object" | "array" | "string" | "integer" | "number" | "boolean";
  nullable?: boolean;
  format?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: Schema | boolean;
  items?: Schema;
  enum?: unknown[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  minItems?: number;
  maxItems?: number;
  minProperties?: number;
  maxProperties?: number;
  allOf?: Schema[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  not?: Schema;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  "x-kubernetes-int-or-string"?: boolean;
  "x-kubernetes-list-type"?: "atomic" | "set" | "map";
  "x-kubernetes-list-map-keys"?: string[];
}

type Json = unknown;

const kindOf = (v: Json): string =>
  v === null ? "null" : Array.isArray(v) ? "array" : Number.isInteger(v) ? "integer" : typeof v;

function typeMatches(s: Schema, v: Json): boolean {
  if (v === null) return s.nullable === true;
  if (s["x-kubernetes-int-or-string"]) return Number.isInteger(v) || typeof v === "string";
  switch (s.type) {
    case undefined:
      return true;
    case "object":
      return kindOf(v) === "object";
    case "array":
      return Array.isArray(v);
    case "integer":
      return Number.isInteger(v);
    case "number":
      return typeof v === "number";
    default:
      return typeof v === s.type;
  }
}

const INT_RANGE: Record<string, [number, number]> = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
};

class Validator {
  readonly problems: string[] = [];

  /** `structural` is false inside junctors, which carry value validations only (no pruning). */
  check(s: Schema, v: Json, path: string, structural: boolean): void {
    if (!typeMatches(s, v)) {
      const want = s["x-kubernetes-int-or-string"] ? "integer or string" : s.type;
      this.problems.push(`${path}: expected ${want}, got ${kindOf(v)}`);
      return;
    }
    if (v === null) return;
    if (s.enum !== undefined && !s.enum.some((e) => e === v))
      this.problems.push(`${path}: expected one of ${s.enum.join(", ")}, got ${JSON.stringify(v)}`);
    if (typeof v === "string") this.string(s, v, path);
    if (typeof v === "number") this.number(s, v, path);
    if (Array.isArray(v)) this.array(s, v, path, structural);
    else if (kindOf(v) === "object") this.object(s, v as Record<string, Json>, path, structural);
    this.junctors(s, v, path);
  }

  private string(s: Schema, v: string, path: string): void {
    const length = [...v].length;
    if (s.minLength !== undefined && length < s.minLength)
      this.problems.push(`${path}: at least ${s.minLength} characters`);
    if (s.maxLength !== undefined && length > s.maxLength)
      this.problems.push(`${path}: at most ${s.maxLength} characters`);
    if (s.pattern !== undefined && !new RegExp(s.pattern, "u").test(v))
      this.problems.push(`${path}: ${JSON.stringify(v)} does not match ${s.pattern}`);
  }

  private number(s: Schema, v: number, path: string): void {
    const range = s.format === undefined ? undefined : INT_RANGE[s.format];
    if (range !== undefined && (v < range[0] || v > range[1]))
      this.problems.push(`${path}: ${v} does not fit ${s.format}`);
    if (s.minimum !== undefined && (s.exclusiveMinimum ? v <= s.minimum : v < s.minimum))
      this.problems.push(`${path}: must be ${s.exclusiveMinimum ? ">" : ">="} ${s.minimum}, got ${v}`);
    if (s.maximum !== undefined && (s.exclusiveMaximum ? v >= s.maximum : v > s.maximum))
      this.problems.push(`${path}: must be ${s.exclusiveMaximum ? "<" : "<="} ${s.maximum}, got ${v}`);
  }

  private array(s: Schema, v: Json[], path: string, structural: boolean): void {
    if (s.minItems !== undefined && v.length < s.minItems)
      this.problems.push(`${path}: at least ${s.minItems} item(s)`);
    if (s.maxItems !== undefined && v.length > s.maxItems)
      this.problems.push(`${path}: at most ${s.maxItems} item(s)`);
    const listType = s["x-kubernetes-list-type"];
    if (listType === "set" || listType === "map") {
      const keys = s["x-kubernetes-list-map-keys"] ?? [];
      const key = (item: Json) =>
        listType === "set"
          ? JSON.stringify(item)
          : JSON.stringify(keys.map((k) => (item as Record<string, Json> | null)?.[k]));
      const seen = new Set<string>();
      v.forEach((item, i) => {
        const k = key(item);
        if (seen.has(k)) this.problems.push(`${path}[${i}]: duplicate in a list of type ${listType}`);
        seen.add(k);
      });
    }
    if (s.items !== undefined) {
      const items = s.items;
      v.forEach((item, i) => {
        this.check(items, item, `${path}[${i}]`, structural);
      });
    }
  }

  private object(s: Schema, v: Record<string, Json>, path: string, structural: boolean): void {
    const keys = Object.keys(v);
    if (s.minProperties !== undefined && keys.length < s.minProperties)
      this.problems.push(`${path}: at least ${s.minProperties} field(s)`);
    if (s.maxProperties !== undefined && keys.length > s.maxProperties)
      this.problems.push(`${path}: at most ${s.maxProperties} field(s)`);
    for (const r of s.required ?? []) if (!(r in v)) this.problems.push(`${path}.${r}: required`);
    const additional = s.additionalProperties;
    for (const key of keys) {
      const at = `${path}.${key}`;
      const prop = s.properties?.[key];
      if (prop !== undefined) this.check(prop, v[key], at, structural);
      else if (typeof additional === "object") this.check(additional, v[key], at, structural);
      else if (
        structural &&
        additional !== true &&
        s["x-kubernetes-preserve-unknown-fields"] !== true &&
        // A junctor may name properties its object does not: only structural schemas prune.
        (s.properties !== undefined || s.type === "object")
      )
        this.problems.push(`${at}: unknown field`);
    }
  }

  private junctors(s: Schema, v: Json, path: string): void {
    const passes = (sub: Schema) => {
      const inner = new Validator();
      inner.check(sub, v, path, false);
      return inner.problems;
    };
    for (const sub of s.allOf ?? []) this.problems.push(...passes(sub));
    if (s.anyOf !== undefined && !s.anyOf.some((sub) => passes(sub).length === 0))
      this.problems.push(`${path}: matches none of anyOf`);
    if (s.oneOf !== undefined) {
      const n = s.oneOf.filter((sub) => passes(sub).length === 0).length;
      if (n !== 1) this.problems.push(`${path}: matches ${n} of oneOf, expected exactly 1`);
    }
    if (s.not !== undefined && passes(s.not).length === 0)
      this.problems.push(`${path}: matches a forbidden schema (not)`);
  }
}

/** Problems of `value` against a schema; paths start at `path`. */
export function schemaProblems(schema: Schema, value: Json, path: string): string[] {
  const v = new Validator();
  v.check(schema, value, path, true);
  return v.problems;
}
