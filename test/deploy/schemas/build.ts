// Short constructors for the structural schemas in this folder, so that each kind reads as a list
// of its fields. These schemas are written by hand from the upstream API types named in each
// file's header; they cover the subtrees our artifacts use in depth, and every sibling field at
// each of those levels at least by name and type (`unmodeled`), so a correct field is accepted and
// a misspelt one is refused.
import type { Schema } from "../crd-schema.ts";

type Rules = Omit<Schema, "type" | "properties" | "required" | "items">;

/** An object with exactly these fields; `required` lists the fields it must have. */
export const object = (
  properties: Record<string, Schema>,
  required: string[] = [],
  rules: Rules = {},
): Schema => ({
  type: "object",
  properties,
  ...(required.length > 0 ? { required } : {}),
  ...rules,
});

export const string = (rules: Rules = {}): Schema => ({ type: "string", ...rules });

/** A string that must be one of `values`. */
export const oneOf = (...values: string[]): Schema => ({ type: "string", enum: values });

export const boolean: Schema = { type: "boolean" };

/** Go int32 and uint32 (controller-gen gives both format int32). */
export const int32 = (rules: Rules = {}): Schema => ({ type: "integer", format: "int32", ...rules });

export const int64 = (rules: Rules = {}): Schema => ({ type: "integer", format: "int64", ...rules });

export const list = (items: Schema, rules: Rules = {}): Schema => ({ type: "array", items, ...rules });

/** map[string]string. */
export const stringMap: Schema = { type: "object", additionalProperties: { type: "string" } };

/** Any JSON value, kept as written (apiextensions JSON, google.protobuf.Struct). */
export const anyJson: Schema = { "x-kubernetes-preserve-unknown-fields": true };

/**
 * A field upstream defines whose contents our artifacts do not use: its type is checked, what is
 * inside is not (no field of it is refused, none is vouched for).
 */
export const unmodeled = (type: "object" | "array" | "string" | "boolean"): Schema => ({
  type,
  "x-kubernetes-preserve-unknown-fields": true,
});

/** Kubernetes resource.Quantity: an integer or a string (a CRD adds its own pattern). */
export const quantity = (pattern: string): Schema => ({ "x-kubernetes-int-or-string": true, pattern });

/** For field-name-only schemas (Istio, whose types @kubernetes-models/istio checks): any value. */
export const anything: Schema = {};

/** For field-name-only schemas: an object value (if it is one) may hold only these fields. */
export const fields = (properties: Record<string, Schema>): Schema => ({ properties });

/** For field-name-only schemas: a list whose items (if objects) may hold only these fields. */
export const listOf = (properties: Record<string, Schema>): Schema => ({ items: { properties } });
