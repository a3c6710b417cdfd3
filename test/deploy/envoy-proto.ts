// Validates Envoy configuration objects (as parsed from YAML) against Envoy's own API protos,
// the copy that ships in @grpc/grpc-js-xds, the way Envoy's proto JSON parser reads them:
// unknown fields and wrong types are errors, `Any` is resolved by its `@type` URL
// (recursively), well-known types take their JSON forms, oneofs hold at most one member, and
// protoc-gen-validate's common rules are enforced (required messages and oneofs, string
// lengths, numeric bounds, list sizes), as Envoy does when it loads a config. Each problem
// names the path inside the document, e.g. `static_resources.clusters[1].lb_policy`.
import { existsSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import protobuf from "protobufjs";

const require = createRequire(import.meta.url);
const DEPS = join(require.resolve("@grpc/grpc-js-xds/package.json"), "..", "deps");
const INCLUDE = ["envoy-api", "xds", "protoc-gen-validate", "googleapis"].map((d) => join(DEPS, d));
// descriptor.proto (imported by the validate and udpa annotations) ships with protobufjs itself.
const PROTOBUFJS = join(require.resolve("protobufjs/package.json"), "..");

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const root = new protobuf.Root();
// Imports resolve against the four include folders; google/protobuf/* falls back to
// protobufjs's bundled copies of the well-known types.
root.resolvePath = (_origin, target) => {
  for (const dir of [...INCLUDE, PROTOBUFJS]) {
    const file = join(dir, target);
    if (existsSync(file)) return file;
  }
  return target;
};

const loadedDirs = new Set<string>();

/**
 * Fields newer Envoy has that the protos in @grpc/grpc-js-xds predate, with their upstream
 * numbers (envoyproxy/data-plane-api envoy/extensions/wasm/v3/wasm.proto; docs/upstream-facts.md):
 * PluginConfig.allow_on_headers_stop_iteration = 9 (Envoy 1.35; without it the filter never sees
 * a request body before the headers go upstream) and PluginConfig.failure_policy = 7, enum
 * FailurePolicy {UNSPECIFIED = 0, FAIL_RELOAD = 1, FAIL_CLOSED = 2, FAIL_OPEN = 3} (Envoy 1.33).
 */
function addNewerEnvoyFields(): void {
  const plugin = root.lookup("envoy.extensions.wasm.v3.PluginConfig");
  if (!(plugin instanceof protobuf.Type)) return;
  if (plugin.fields.allow_on_headers_stop_iteration === undefined) {
    const field = new protobuf.Field("allow_on_headers_stop_iteration", 9, "google.protobuf.BoolValue");
    plugin.add(field);
    field.resolve();
  }
  if (plugin.fields.failure_policy === undefined) {
    const pkg = plugin.parent as protobuf.Namespace;
    if (pkg.get("FailurePolicy") === null)
      pkg.add(
        new protobuf.Enum("FailurePolicy", { UNSPECIFIED: 0, FAIL_RELOAD: 1, FAIL_CLOSED: 2, FAIL_OPEN: 3 }),
      );
    const field = new protobuf.Field("failure_policy", 7, "FailurePolicy");
    plugin.add(field);
    field.resolve();
  }
}

/**
 * Extensions newer Envoy has whose protos @grpc/grpc-js-xds 1.14 does not ship, transcribed with
 * their upstream package, names and numbers (docs/upstream-facts.md):
 * envoy/extensions/load_balancing_policies/override_host/v3/override_host.proto (Envoy 1.35),
 * with its validation rules (at least one source; fallback_policy required).
 */
const NEWER_PACKAGES: Record<string, { needs: string[]; proto: string }> = {
  "envoy.extensions.load_balancing_policies.override_host.v3": {
    needs: ["envoy.config.cluster.v3.LoadBalancingPolicy", "envoy.type.metadata.v3.MetadataKey"],
    proto: `syntax = "proto3";
      package envoy.extensions.load_balancing_policies.override_host.v3;
      import "validate/validate.proto";
      message OverrideHost {
        message OverrideHostSource {
          string header = 1;
          .envoy.type.metadata.v3.MetadataKey metadata = 2;
        }
        repeated OverrideHostSource override_host_sources = 1 [(validate.rules).repeated = {min_items: 1}];
        .envoy.type.metadata.v3.MetadataKey selected_host_key = 2;
        .envoy.config.cluster.v3.LoadBalancingPolicy fallback_policy = 3 [(validate.rules).message = {required: true}];
      }`,
  },
};

function addNewerPackage(pkg: string): void {
  const newer = NEWER_PACKAGES[pkg];
  if (newer === undefined || root.lookup(pkg) !== null) return;
  for (const t of newer.needs) lookupType(t);
  protobuf.parse(newer.proto, root, { keepCase: true });
  root.resolveAll();
}

/** Finds a message type by full name, loading the protos of its package folder on first use. */
export function lookupType(fullName: string): protobuf.Type | null {
  const found = root.lookup(fullName);
  if (found instanceof protobuf.Type) return found;
  addNewerPackage(fullName.split(".").slice(0, -1).join("."));
  const added = root.lookup(fullName);
  if (added instanceof protobuf.Type) return added;
  // Envoy and xds lay out files by package: envoy.config.cluster.v3.Cluster → envoy/config/cluster/v3/*.proto
  const dir = fullName.split(".").slice(0, -1).join("/");
  if (loadedDirs.has(dir)) return null;
  loadedDirs.add(dir);
  for (const base of INCLUDE) {
    const folder = join(base, dir);
    if (!existsSync(folder)) continue;
    const files = readdirSync(folder).filter((f) => f.endsWith(".proto"));
    root.loadSync(
      files.map((f) => join(dir, f)),
      { keepCase: true },
    );
  }
  addNewerEnvoyFields();
  root.resolveAll();
  const again = root.lookup(fullName);
  return again instanceof protobuf.Type ? again : null;
}

const WRAPPERS: Record<string, string> = {
  DoubleValue: "double",
  FloatValue: "float",
  Int64Value: "int64",
  UInt64Value: "uint64",
  Int32Value: "int32",
  UInt32Value: "uint32",
  BoolValue: "bool",
  StringValue: "string",
  BytesValue: "bytes",
};

function camel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function kindOf(v: Json): string {
  return v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
}

class Checker {
  readonly problems: string[] = [];

  fail(path: string, message: string): void {
    this.problems.push(`${path || "(root)"}: ${message}`);
  }

  scalar(type: string, v: Json, path: string): void {
    switch (type) {
      case "string":
        if (typeof v !== "string") this.fail(path, `expected a string, got ${kindOf(v)}`);
        return;
      case "bytes":
        if (typeof v !== "string" || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(v))
          this.fail(path, "expected base64 bytes");
        return;
      case "bool":
        if (typeof v !== "boolean") this.fail(path, `expected true or false, got ${kindOf(v)}`);
        return;
      case "double":
      case "float":
        if (
          typeof v !== "number" &&
          !(typeof v === "string" && /^(-?Infinity|NaN|-?\d+(\.\d+)?([eE][-+]?\d+)?)$/.test(v))
        )
          this.fail(path, `expected a number, got ${kindOf(v)}`);
        return;
      default: {
        // int32, uint32, int64, uint64, sint*, fixed*, sfixed*: integers; 64-bit ones may be strings.
        const unsigned = type.startsWith("u") || type.startsWith("fixed");
        const wide = type.endsWith("64");
        const n =
          typeof v === "number"
            ? v
            : typeof v === "string" && wide && /^-?\d+$/.test(v)
              ? Number(v)
              : Number.NaN;
        if (!Number.isInteger(n)) this.fail(path, `expected an integer (${type}), got ${JSON.stringify(v)}`);
        else if (unsigned && n < 0) this.fail(path, `expected a non-negative integer (${type})`);
        else if (!wide && (n > (unsigned ? 0xffffffff : 0x7fffffff) || n < -0x80000000))
          this.fail(path, `${n} does not fit ${type}`);
      }
    }
  }

  /** A value of a well-known type in its JSON form; false when `type` is an ordinary message. */
  wellKnown(type: protobuf.Type, v: Json, path: string): boolean {
    const name = type.fullName.replace(/^\./, "");
    if (!name.startsWith("google.protobuf.")) return false;
    const short = name.slice("google.protobuf.".length);
    const wrapped = WRAPPERS[short];
    if (wrapped !== undefined) {
      this.scalar(wrapped, v, path);
      return true;
    }
    switch (short) {
      case "Any":
        this.any(v, path);
        return true;
      case "Duration":
        if (typeof v !== "string" || !/^-?\d+(\.\d{1,9})?s$/.test(v))
          this.fail(path, `expected a duration such as "1.5s", got ${JSON.stringify(v)}`);
        return true;
      case "Timestamp":
        if (typeof v !== "string" || Number.isNaN(Date.parse(v)))
          this.fail(path, "expected an RFC 3339 timestamp");
        return true;
      case "FieldMask":
        if (typeof v !== "string") this.fail(path, "expected a field mask string");
        return true;
      case "Struct":
        if (kindOf(v) !== "object") this.fail(path, `expected an object, got ${kindOf(v)}`);
        return true;
      case "ListValue":
        if (!Array.isArray(v)) this.fail(path, `expected a list, got ${kindOf(v)}`);
        return true;
      case "Value":
        return true;
      case "Empty":
        if (kindOf(v) !== "object" || Object.keys(v as object).length > 0) this.fail(path, "expected {}");
        return true;
      default:
        return false;
    }
  }

  any(v: Json, path: string): void {
    if (kindOf(v) !== "object") {
      this.fail(path, `expected an object with "@type", got ${kindOf(v)}`);
      return;
    }
    const obj = v as { [key: string]: Json };
    if (Object.keys(obj).length === 0) return; // an empty Any (type_url ""), as protojson writes it
    const url = obj["@type"];
    if (typeof url !== "string") {
      this.fail(path, 'Any without "@type"');
      return;
    }
    const slash = url.lastIndexOf("/");
    const typeName = url.slice(slash + 1);
    const type = lookupType(typeName);
    if (type === null) {
      this.fail(`${path}.@type`, `unknown type ${url}`);
      return;
    }
    const { "@type": _, ...rest } = obj;
    const isWellKnown = typeName.startsWith("google.protobuf.") && typeName !== "google.protobuf.Any";
    // A well-known type inside Any carries its JSON form in "value" (proto3 JSON mapping).
    if (isWellKnown && this.wellKnown(type, rest.value as Json, `${path}.value`)) {
      const extra = Object.keys(rest).filter((k) => k !== "value");
      if (extra.length > 0) this.fail(path, `unknown field(s) ${extra.join(", ")} next to "value"`);
      return;
    }
    this.message(type, rest, path);
  }

  field(field: protobuf.Field, v: Json, path: string): void {
    const resolved = field.resolvedType;
    if (resolved instanceof protobuf.Enum) {
      const ok =
        (typeof v === "string" && v in resolved.values) ||
        (typeof v === "number" && Object.values(resolved.values).includes(v));
      if (!ok)
        this.fail(
          path,
          `expected one of ${Object.keys(resolved.values).join(", ")}, got ${JSON.stringify(v)}`,
        );
      return;
    }
    if (resolved instanceof protobuf.Type) {
      if (!this.wellKnown(resolved, v, path)) this.message(resolved, v, path);
      return;
    }
    this.scalar(field.type, v, path);
  }

  /** protoc-gen-validate rules on a present field: lengths, bounds, list sizes. */
  rules(field: protobuf.Field, v: Json, path: string): void {
    for (const [key, bound] of Object.entries(field.options ?? {})) {
      const m = /^\(validate\.rules\)\.(\w+)\.(\w+)$/.exec(key);
      if (m === null || typeof bound !== "number") continue;
      const [, kind, rule] = m as unknown as [string, string, string];
      if (kind === "string" && typeof v === "string") {
        const size = rule.endsWith("_bytes") ? Buffer.byteLength(v) : [...v].length;
        if ((rule === "min_len" || rule === "min_bytes") && size < bound)
          this.fail(path, `at least ${bound} characters`);
        if ((rule === "max_len" || rule === "max_bytes") && size > bound)
          this.fail(path, `at most ${bound} characters`);
      } else if (kind === "repeated" && Array.isArray(v)) {
        if (rule === "min_items" && v.length < bound) this.fail(path, `at least ${bound} item(s)`);
        if (rule === "max_items" && v.length > bound) this.fail(path, `at most ${bound} item(s)`);
      } else if (/^u?int(32|64)$|^double$|^float$/.test(kind)) {
        const n = typeof v === "number" ? v : typeof v === "string" ? Number(v) : Number.NaN;
        if (Number.isNaN(n)) continue; // the type check reports it
        const ok = { gt: n > bound, gte: n >= bound, lt: n < bound, lte: n <= bound }[rule as "gt"];
        if (ok === false) this.fail(path, `must be ${rule} ${bound}, got ${n}`);
      }
    }
  }

  message(type: protobuf.Type, v: Json, path: string): void {
    if (kindOf(v) !== "object") {
      this.fail(path, `expected an object (${type.name}), got ${kindOf(v)}`);
      return;
    }
    const obj = v as { [key: string]: Json };
    const byName = new Map<string, protobuf.Field>();
    for (const f of type.fieldsArray) {
      byName.set(f.name, f);
      byName.set(camel(f.name), f);
    }
    const at = (k: string) => (path === "" ? k : `${path}.${k}`);
    for (const [key, value] of Object.entries(obj)) {
      const field = byName.get(key);
      if (field === undefined) {
        this.fail(at(key), `unknown field in ${type.fullName.replace(/^\./, "")}`);
        continue;
      }
      if (value === null) continue; // JSON null = default value
      this.rules(field, value, at(key));
      if (field instanceof protobuf.MapField) {
        if (kindOf(value) !== "object") this.fail(at(key), `expected a map, got ${kindOf(value)}`);
        else
          for (const [k, item] of Object.entries(value as object))
            this.field(field, item as Json, `${at(key)}.${k}`);
      } else if (field.repeated) {
        if (!Array.isArray(value)) this.fail(at(key), `expected a list, got ${kindOf(value)}`);
        else
          value.forEach((item, i) => {
            this.field(field, item, `${at(key)}[${i}]`);
          });
      } else {
        this.field(field, value, at(key));
      }
    }
    const present = (f: protobuf.Field) => obj[f.name] != null || obj[camel(f.name)] != null;
    for (const oneof of type.oneofsArray) {
      const set = oneof.fieldsArray.filter(present);
      if (set.length > 1)
        this.fail(path, `oneof ${oneof.name} has several members: ${set.map((f) => f.name).join(", ")}`);
      if (set.length === 0 && oneof.options?.["(validate.required)"] === true)
        this.fail(
          path,
          `oneof ${oneof.name} is required (one of ${oneof.fieldsArray.map((f) => f.name).join(", ")})`,
        );
    }
    for (const f of type.fieldsArray) {
      // Inside a oneof the rule applies only to the chosen member, which is then present.
      if (f.options?.["(validate.rules).message.required"] === true && f.partOf == null && !present(f))
        this.fail(at(f.name), `required field of ${type.name} is missing`);
    }
  }
}

/** Problems of `value` read as the message `typeName` (e.g. envoy.config.bootstrap.v3.Bootstrap). */
export function validateEnvoy(typeName: string, value: unknown, path = ""): string[] {
  const type = lookupType(typeName);
  if (type === null) throw new Error(`no such Envoy type ${typeName}`);
  const checker = new Checker();
  if (!checker.wellKnown(type, value as Json, path)) checker.message(type, value as Json, path);
  return checker.problems;
}
