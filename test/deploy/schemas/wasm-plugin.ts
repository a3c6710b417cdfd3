// WasmPlugin spec field names, checked against istio/api 1.29.2 extensions/v1alpha1/wasm.proto and type/v1beta1/selector.proto.
// Names only: types, enums and required fields are @kubernetes-models/istio's job (generated from
// Istio 1.29.2's CRD). This list exists because that CRD does not refuse unknown fields — the
// API server prunes them, or refuses them under kubectl's strict field validation — so a
// misspelt field would vanish silently.
import { anything, fields, listOf } from "./build.ts";

/** istio.type.v1beta1.PolicyTargetReference. */
const targetRef = fields({ group: anything, kind: anything, name: anything, namespace: anything });

export const wasmPluginSpecFields = fields({
  selector: fields({ matchLabels: anything }),
  targetRef,
  targetRefs: { items: targetRef },
  url: anything,
  sha256: anything,
  imagePullPolicy: anything,
  imagePullSecret: anything,
  verificationKey: anything,
  pluginConfig: anything,
  pluginName: anything,
  phase: anything,
  priority: anything,
  failStrategy: anything,
  vmConfig: fields({ env: listOf({ name: anything, valueFrom: anything, value: anything }) }),
  match: listOf({ mode: anything, ports: listOf({ number: anything }) }),
  type: anything,
});
