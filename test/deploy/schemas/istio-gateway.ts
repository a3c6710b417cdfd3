// Istio Gateway spec field names, checked against istio/api 1.29.2 networking/v1alpha3/gateway.proto (served as networking.istio.io/v1).
// Names only, every field of Server, Port and ServerTLSSettings; types, enums and required fields
// are @kubernetes-models/istio's job (Istio's CRD does not refuse unknown fields).
import { anything, fields, listOf } from "./build.ts";

const tls = fields({
  httpsRedirect: anything,
  mode: anything,
  serverCertificate: anything,
  privateKey: anything,
  caCertificates: anything,
  caCrl: anything,
  credentialName: anything,
  credentialNames: anything,
  tlsCertificates: listOf({ serverCertificate: anything, privateKey: anything, caCertificates: anything }),
  caCertCredentialName: anything,
  subjectAltNames: anything,
  verifyCertificateSpki: anything,
  verifyCertificateHash: anything,
  minProtocolVersion: anything,
  maxProtocolVersion: anything,
  cipherSuites: anything,
});

export const istioGatewaySpecFields = fields({
  selector: anything,
  servers: listOf({
    port: fields({ number: anything, protocol: anything, name: anything, targetPort: anything }),
    bind: anything,
    hosts: anything,
    tls,
    defaultEndpoint: anything,
    name: anything,
  }),
});
