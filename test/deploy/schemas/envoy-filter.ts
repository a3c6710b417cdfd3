// EnvoyFilter spec field names, checked against istio/api 1.29.2 networking/v1alpha3/envoy_filter.proto (and sidecar.proto's WorkloadSelector).
// Names only, down to each patch; a patch's `value` is Envoy configuration, which test/deploy
// validates against Envoy's own protos. Types, enums and required fields are
// @kubernetes-models/istio's job; like the WasmPlugin list, this one exists because Istio's CRD
// does not refuse unknown fields.
import { anything, fields, listOf } from "./build.ts";

const subFilter = fields({ name: anything });

const listener = fields({
  portNumber: anything,
  portName: anything,
  filterChain: fields({
    name: anything,
    sni: anything,
    transportProtocol: anything,
    applicationProtocols: anything,
    filter: fields({ name: anything, subFilter }),
    destinationPort: anything,
  }),
  listenerFilter: anything,
  name: anything,
});

const routeConfiguration = fields({
  portNumber: anything,
  portName: anything,
  gateway: anything,
  vhost: fields({
    name: anything,
    domainName: anything,
    route: fields({ name: anything, action: anything }),
  }),
  name: anything,
});

const cluster = fields({ portNumber: anything, service: anything, subset: anything, name: anything });

const waypoint = fields({
  portNumber: anything,
  route: fields({ name: anything }),
  filter: fields({ name: anything, subFilter }),
});

export const envoyFilterSpecFields = fields({
  workloadSelector: fields({ labels: anything }),
  targetRefs: listOf({ group: anything, kind: anything, name: anything, namespace: anything }),
  configPatches: listOf({
    applyTo: anything,
    match: fields({
      context: anything,
      proxy: fields({ proxyVersion: anything, metadata: anything }),
      listener,
      routeConfiguration,
      cluster,
      waypoint,
    }),
    patch: fields({ operation: anything, value: anything, filterClass: anything }),
  }),
  priority: anything,
});
