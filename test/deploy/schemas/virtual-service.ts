// VirtualService spec field names, checked against istio/api 1.29.2 networking/v1alpha3/virtual_service.proto (served as networking.istio.io/v1).
// Names only: the spec, HTTPRoute, HTTPRouteDestination, Destination and PortSelector in full (the
// path kvroute's example uses); tcp, tls and an HTTP route's other settings by name. Types, enums
// and required fields are @kubernetes-models/istio's job.
import { anything, fields, listOf } from "./build.ts";

const destination = fields({ host: anything, subset: anything, port: fields({ number: anything }) });

const http = listOf({
  name: anything,
  match: anything,
  route: listOf({ destination, weight: anything, headers: anything }),
  redirect: anything,
  directResponse: anything,
  delegate: anything,
  rewrite: anything,
  timeout: anything,
  retries: anything,
  fault: anything,
  mirror: anything,
  mirrors: anything,
  mirrorPercent: anything,
  mirror_percent: anything,
  mirrorPercentage: anything,
  corsPolicy: anything,
  headers: anything,
});

export const virtualServiceSpecFields = fields({
  hosts: anything,
  gateways: anything,
  http,
  tls: anything,
  tcp: anything,
  exportTo: anything,
});
