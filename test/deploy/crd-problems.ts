// Problems of one Istio or Envoy Gateway resource, with the path of each bad field. Envoy
// Gateway's kinds are checked against our structural schemas alone; Istio's by
// @kubernetes-models/istio (types, enums, required fields) plus our list of their field names
// (unknown fields, which Istio's CRDs do not refuse).
import { schemaProblems } from "./crd-schema.ts";
import { istioModelProblems } from "./istio-models.ts";
import { kindSchemas } from "./schemas/index.ts";

/**
 * Problems of one document; documents of other kinds give none. apiVersion, kind and metadata
 * belong to every object (the API server accepts them whatever the schema says): apiVersion must
 * name the kind's group and version, and of the metadata only name and namespace (all these kinds
 * are namespaced) are checked.
 */
export function crdProblems(doc: Record<string, unknown>, path: string): string[] {
  const candidates = kindSchemas(String(doc.kind), String(doc.apiVersion));
  const kind = candidates[0];
  if (kind === undefined) return [];
  const out: string[] = [];
  if (doc.apiVersion !== kind.apiVersion) {
    out.push(`${path}.apiVersion: expected ${candidates.map((k) => k.apiVersion).join(" or ")}`);
    // Two groups define this kind: which schema the rest should follow is unknown.
    if (candidates.length > 1) return out;
  }
  const meta = doc.metadata as Record<string, unknown> | undefined;
  if (typeof meta?.name !== "string" || typeof meta?.namespace !== "string")
    out.push(`${path}.metadata: name and namespace are required`);
  const { apiVersion: _v, kind: _k, metadata: _m, ...body } = doc;
  out.push(...schemaProblems(kind.body, body, path));
  if (kind.typesCheckedBy === "@kubernetes-models/istio") {
    const model = istioModelProblems(doc, path);
    if (model === undefined) throw new Error(`no @kubernetes-models/istio model for ${String(doc.kind)}`);
    out.push(...model);
  }
  return out;
}
