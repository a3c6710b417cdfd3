// Validates Istio's EnvoyFilter, WasmPlugin, Gateway and VirtualService with @kubernetes-models/istio, whose validators are
// generated from Istio's own CRD schemas (the version is in that package's package.json): types,
// enums, patterns, bounds and required fields. It does not refuse unknown fields, since Istio's
// CRDs do not either; test/deploy/schemas/ lists the field names for that.
import { WasmPlugin } from "@kubernetes-models/istio/extensions.istio.io/v1alpha1/WasmPlugin";
import { Gateway } from "@kubernetes-models/istio/networking.istio.io/v1/Gateway";
import { VirtualService } from "@kubernetes-models/istio/networking.istio.io/v1/VirtualService";
import { EnvoyFilter } from "@kubernetes-models/istio/networking.istio.io/v1alpha3/EnvoyFilter";

/** The part of an ajv error the messages use. */
interface ModelError {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
}

interface IstioModel {
  apiVersion: string;
  kind: string;
  validate(doc: Record<string, unknown>): void;
}

const MODELS: ReadonlyMap<string, IstioModel> = new Map([
  [
    "WasmPlugin",
    {
      apiVersion: WasmPlugin.apiVersion,
      kind: WasmPlugin.kind,
      validate: (doc) => new WasmPlugin(doc as never).validate(),
    },
  ],
  [
    "EnvoyFilter",
    {
      apiVersion: EnvoyFilter.apiVersion,
      kind: EnvoyFilter.kind,
      validate: (doc) => new EnvoyFilter(doc as never).validate(),
    },
  ],
  [
    "Gateway",
    {
      apiVersion: Gateway.apiVersion,
      kind: Gateway.kind,
      validate: (doc) => new Gateway(doc as never).validate(),
    },
  ],
  [
    "VirtualService",
    {
      apiVersion: VirtualService.apiVersion,
      kind: VirtualService.kind,
      validate: (doc) => new VirtualService(doc as never).validate(),
    },
  ],
]);

/** The Istio kinds validated here, by kind (unique among Istio's), with their apiVersion. */
export const ISTIO_KINDS: ReadonlyMap<string, string> = new Map(
  [...MODELS].map(([kind, model]) => [kind, model.apiVersion]),
);

const kindOf = (v: unknown): string =>
  v === null ? "null" : Array.isArray(v) ? "array" : Number.isInteger(v) ? "integer" : typeof v;

/** `/spec/match/0/mode` → `.spec.match[0].mode`, and the value found there. */
function locate(doc: unknown, pointer: string): { at: string; value: unknown } {
  let at = "";
  let value = doc;
  for (const raw of pointer.split("/").slice(1)) {
    const key = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    at += Array.isArray(value) ? `[${key}]` : `.${key}`;
    value = (value as Record<string, unknown> | undefined)?.[key];
  }
  return { at, value };
}

function problemOf(doc: unknown, e: ModelError, path: string): string {
  const { at, value } = locate(doc, e.instancePath);
  switch (e.keyword) {
    case "required":
      return `${path}${at}.${String(e.params.missingProperty)}: required`;
    case "enum":
      return `${path}${at}: expected one of ${(e.params.allowedValues as unknown[]).join(", ")}, got ${JSON.stringify(value)}`;
    case "type":
      return `${path}${at}: expected ${String(e.params.type)}, got ${kindOf(value)}`;
    default:
      return `${path}${at}: ${e.message ?? e.keyword}`;
  }
}

/**
 * Problems of one Istio document according to @kubernetes-models/istio, with paths in our form;
 * undefined for other kinds. apiVersion and kind are left to the caller.
 */
export function istioModelProblems(doc: Record<string, unknown>, path: string): string[] | undefined {
  const model = MODELS.get(String(doc.kind));
  if (model === undefined) return undefined;
  const checked = { ...doc, apiVersion: model.apiVersion, kind: model.kind };
  try {
    model.validate(checked);
    return [];
  } catch (err) {
    const errors = (err as { errors?: ModelError[] }).errors;
    if (!Array.isArray(errors)) throw err;
    return errors.map((e) => problemOf(checked, e, path));
  }
}
