// kvroute's own ext_proc protos (control-plane/src/epp/proto, shipped because the image has no
// dev dependency) against Envoy's API as @grpc/grpc-js-xds ships it: every message, field,
// number, type and enum value we declare must be Envoy's, except the fields newer than that copy,
// which are listed here with their upstream numbers (envoyproxy/envoy main, 2026).
import { join } from "node:path";
import protobuf from "protobufjs";
import { describe, expect, it } from "vitest";
import { lookupType } from "../deploy/envoy-proto.ts";

const OURS = new URL("../../control-plane/src/epp/proto", import.meta.url).pathname;

const ours = new protobuf.Root();
ours.resolvePath = (_origin, target) => {
  if (target.startsWith("google/protobuf/")) return target;
  return join(OURS, target);
};
ours.loadSync(["envoy/service/ext_proc/v3/external_processor.proto", "grpc/health/v1/health.proto"], {
  keepCase: true,
});
ours.resolveAll();

/** Newer than the grpc-js-xds copy: "Message.field" → upstream number. */
const NEWER_FIELDS: Record<string, number> = {
  "envoy.service.ext_proc.v3.ProcessingRequest.protocol_config": 11,
  "envoy.service.ext_proc.v3.BodyMutation.streamed_response": 3,
};
const NEWER_MESSAGES = new Set([
  "envoy.service.ext_proc.v3.ProtocolConfiguration",
  "envoy.service.ext_proc.v3.StreamedBodyResponse",
]);
const NEWER_ENUM_VALUES: Record<string, Record<string, number>> = {
  "envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode": {
    FULL_DUPLEX_STREAMED: 4,
    GRPC: 5,
  },
};

function types(ns: protobuf.NamespaceBase, out: protobuf.Type[] = []): protobuf.Type[] {
  for (const n of ns.nestedArray) {
    if (n instanceof protobuf.Type) out.push(n);
    if (n instanceof protobuf.Namespace || n instanceof protobuf.Type) types(n, out);
  }
  return out;
}

const envoyTypes = types(ours).filter((t) => t.fullName.startsWith(".envoy."));

describe("kvroute's ext_proc protos are Envoy's", () => {
  it("declares the messages GAIE's protocol needs", () => {
    const names = envoyTypes.map((t) => t.fullName.slice(1));
    for (const n of [
      "envoy.service.ext_proc.v3.ProcessingRequest",
      "envoy.service.ext_proc.v3.ProcessingResponse",
      "envoy.service.ext_proc.v3.ImmediateResponse",
      "envoy.service.ext_proc.v3.StreamedBodyResponse",
      "envoy.config.core.v3.Metadata",
    ])
      expect(names).toContain(n);
  });

  for (const t of envoyTypes) {
    const name = t.fullName.slice(1);
    it(`${name}: names, numbers and types`, () => {
      if (NEWER_MESSAGES.has(name)) {
        expect(lookupType(name), `${name} is listed as newer, but the copy has it`).toBeNull();
        return;
      }
      const upstream = lookupType(name);
      expect(upstream, name).not.toBeNull();
      for (const f of t.fieldsArray) {
        const key = `${name}.${f.name}`;
        const u = upstream?.fields[f.name];
        if (key in NEWER_FIELDS) {
          expect(u, `${key} is listed as newer, but the copy has it`).toBeUndefined();
          expect(f.id).toBe(NEWER_FIELDS[key]);
          continue;
        }
        expect(u, key).toBeDefined();
        expect(f.id, key).toBe(u?.id);
        expect(f.repeated, key).toBe(u?.repeated);
        expect(f.map, key).toBe(u?.map);
        u?.resolve();
        f.resolve();
        const ourType = f.resolvedType?.fullName ?? f.type;
        const theirType = u?.resolvedType?.fullName ?? u?.type;
        expect(ourType, key).toBe(theirType);
        expect(f.partOf?.name, `${key} oneof`).toBe(u?.partOf?.name);
      }
      for (const e of t.nestedArray) {
        if (!(e instanceof protobuf.Enum)) continue;
        const ue = upstream?.lookupEnum(e.name);
        const newer = NEWER_ENUM_VALUES[e.fullName.slice(1)] ?? {};
        for (const [k, v] of Object.entries(e.values)) {
          if (k in newer) {
            expect(v).toBe(newer[k]);
            expect(ue?.values[k], `${e.fullName}.${k} is listed as newer`).toBeUndefined();
          } else expect(ue?.values[k], `${e.fullName}.${k}`).toBe(v);
        }
      }
    });
  }

  it("the status code enum is Envoy's, value for value", () => {
    const ourEnum = ours.lookupEnum("envoy.type.v3.StatusCode");
    const theirs = lookupType("envoy.type.v3.HttpStatus")?.fields.code;
    theirs?.resolve();
    const theirEnum = theirs?.resolvedType as protobuf.Enum;
    expect(ourEnum.values).toEqual(theirEnum.values);
  });
});
