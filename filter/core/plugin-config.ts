// The filter's plugin configuration (the JSON string in Envoy's Wasm filter config), parsed
// once in on_configure. Strict: unknown fields and wrong types are errors that name the field,
// so a typo fails the Envoy config instead of silently running with a default.
// Fields and defaults: docs/configuration.md "Filter plugin configuration".
import { ByteBuf } from "./byte-buf";
import { decodeString, scanString, stringHasEscape } from "./json-string";

export class PluginConfig {
  cluster: string = "kvroute_control_plane";
  authority: string = "kvroute-control-plane";
  syncPath: string = "/v1/sync";
  reportPath: string = "/v1/report";
  token: string = "";
  /** Upper bound on one sync long-poll or report call (ms). */
  timeoutMs: u32 = 30000;
  tickMs: u32 = 100;
  /** Report batching period (ms). */
  reportMs: u32 = 500;
  maxBodyBytes: u32 = 4 * 1024 * 1024;
  /**
   * Response bytes the filter looks at for the engine's served cached tokens (usage-scan.ts);
   * past them the served value of that request is unknown. 0 = never look.
   */
  usageScanBytes: u32 = 16 * 1024 * 1024;
  /**
   * One streamed (SSE) answer in this many is read for served cached tokens; JSON answers always
   * are. Reading a stream costs a host call per chunk (its copy into the VM), whatever the scan
   * does: a 512-event answer ~150 µs. The rest are reported unread, not unknown. 1 = every one.
   */
  usageScanStreamSample: u32 = 4;
  /** Before the first cache arrives: true = pass requests on without a destination; false = 503. */
  failOpen: bool = true;
  inferencePaths: string[] = ["/v1/completions", "/v1/chat/completions"];
  /** Shown in the control plane's status; defaults to the Envoy node id. */
  gatewayId: string = "";
  /** Also honour `x-request-id` as the request id in reports (it is read, never written). */
  requestIdHeader: string = "x-request-id";
  /**
   * How many fallback endpoints follow the best one in x-gateway-destination-endpoint (GAIE's
   * ordered list). 0 = one literal ip:port, the only form Envoy's ORIGINAL_DST accepts; the
   * endpoint picker sets it for gateways that walk the list on retries.
   */
  destinationFallbacks: u32 = 0;
  /**
   * 0: every worker thread seeds its own sequence for tie-breaks and sampling, so threads sharing
   * a stale view of the load do not all pick alike. Non-zero: every thread starts from this seed —
   * reproducible decisions, for comparisons and tests.
   */
  seed: u32 = 0;
}

/**
 * The largest maxBodyBytes (64 MiB). Envoy's V8 caps a VM's memory at 1 GiB (proxy-wasm-cpp-host
 * PROXY_WASM_HOST_MAX_WASM_MEMORY_SIZE_BYTES); past it memory.grow fails and AssemblyScript
 * aborts: a trap, an outage. Routing a chat body of n bytes holds the body (the host's copy, in a
 * block outside the GC heap that is freed as soon as the body is routed, filter/assembly/host.ts)
 * and the rendered stream (a reused buffer that doubling grows to 2n while the old one is still
 * held; maxStream caps the stream at 2n). Measured with the shipped module in the Node host under
 * the same cap (host/memory-cap.ts): a burst of 14 chat bodies of 64 MiB back to back leaves the
 * VM at 276 MiB (4.3n: one body at a time). Before the body left the GC heap, bursts needed
 * 8.5–9.5n (547–615 MiB: the collector freed earlier bodies late) and at 128 MiB the 13th body of
 * a burst trapped. 64 MiB leaves 750 MiB for the working set and for templates that render longer.
 */
export const MAX_BODY_BYTES: u32 = 64 << 20;

/** InferencePool allows 8 target ports per pod; a longer list would only repeat the pool. */
export const MAX_DESTINATION_FALLBACKS: u32 = 7;

/** Set when parsePluginConfig returns null: one line naming the bad field. */
export let pluginConfigError: string = "";

class Cursor {
  p: usize;
  end: usize;
  err: string = "";
  tmp: ByteBuf = new ByteBuf(64);
  constructor(p: usize, end: usize) {
    this.p = p;
    this.end = end;
  }
  ws(): void {
    while (this.p < this.end) {
      const c = load<u8>(this.p);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      this.p++;
    }
  }
  peek(): i32 {
    this.ws();
    return this.p < this.end ? <i32>load<u8>(this.p) : -1;
  }
  expect(c: i32, what: string): bool {
    if (this.peek() !== c) {
      this.fail(`expected ${what}`);
      return false;
    }
    this.p++;
    return true;
  }
  fail(msg: string): void {
    if (this.err.length === 0) this.err = msg;
  }
  /** A JSON string value (the cursor at its opening quote), or null after fail(). */
  str(field: string): string | null {
    if (this.peek() !== 0x22) {
      this.fail(`${field}: expected a string`);
      return null;
    }
    const start = this.p + 1;
    const close = scanString(start, this.end);
    if (close < 0) {
      this.fail(`${field}: malformed string`);
      return null;
    }
    this.tmp.len = 0;
    decodeString(start, <i32>(<usize>close - start), stringHasEscape, this.tmp);
    this.p = <usize>close + 1;
    return String.UTF8.decodeUnsafe(this.tmp.ptr, <usize>this.tmp.len);
  }
  /** A non-negative integer up to max, or -1 after fail(). */
  uint(field: string, max: u32): i64 {
    this.ws();
    let v: u64 = 0;
    let digits = 0;
    while (this.p < this.end) {
      const d = <u32>load<u8>(this.p) - 0x30;
      if (d > 9) break;
      v = v * 10 + d;
      digits++;
      this.p++;
      if (digits > 10) break;
    }
    const next = this.p < this.end ? <u32>load<u8>(this.p) : 0;
    if (digits === 0 || digits > 10 || v > <u64>max || next === 0x2e || next === 0x65 || next === 0x45) {
      this.fail(`${field}: expected an integer from 0 to ${max}`);
      return -1;
    }
    return <i64>v;
  }
  bool(field: string): i32 {
    this.ws();
    if (this.word("true")) return 1;
    if (this.word("false")) return 0;
    this.fail(`${field}: expected true or false`);
    return -1;
  }
  private word(w: string): bool {
    const n = w.length;
    if (this.p + <usize>n > this.end) return false;
    for (let i = 0; i < n; i++) if (<i32>load<u8>(this.p + <usize>i) !== w.charCodeAt(i)) return false;
    this.p += <usize>n;
    return true;
  }
  /** Reads `{ "key": value, … }`, calling field(key) for each; false after fail(). */
  object(where: string, field: (c: Cursor, key: string, where: string) => void): bool {
    if (!this.expect(0x7b, where.length === 0 ? "a JSON object" : `${where}: an object`)) return false;
    if (this.peek() === 0x7d) {
      this.p++;
      return true;
    }
    // JSON parsers disagree on a repeated key (first or last wins): refuse it.
    const seen = new Set<string>();
    while (this.err.length === 0) {
      const key = this.str(where.length === 0 ? "key" : `${where} key`);
      if (key === null) return false;
      const path = where.length === 0 ? key : `${where}.${key}`;
      if (seen.has(key)) {
        this.fail(`${path}: given twice`);
        return false;
      }
      seen.add(key);
      if (!this.expect(0x3a, "':'")) return false;
      field(this, key, path);
      if (this.err.length > 0) return false;
      const c = this.peek();
      this.p++;
      if (c === 0x7d) return true;
      if (c !== 0x2c) {
        this.fail(`${where.length === 0 ? "configuration" : where}: expected ',' or '}'`);
        return false;
      }
    }
    return false;
  }
}

// The object() callbacks cannot capture locals (AssemblyScript has no closures): they write here.
let building: PluginConfig = new PluginConfig();

function positive(c: Cursor, path: string, max: u32): u32 {
  const v = c.uint(path, max);
  if (v === 0) c.fail(`${path}: must be at least 1`);
  return v < 0 ? 0 : <u32>v;
}

/** Visible ASCII only (0x21–0x7e), plus the space when `space`: what may go into a header value. */
function headerSafe(s: string, space: bool): bool {
  for (let i = 0; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    if ((ch < 0x21 || ch > 0x7e) && !(space && ch === 0x20)) return false;
  }
  return true;
}

/** An HTTP field name: one or more tchar (RFC 9110 §5.6.2). */
function isToken(s: string): bool {
  if (s.length === 0) return false;
  for (let i = 0; i < s.length; i++) {
    const ch = s.charCodeAt(i);
    const alnum = (ch >= 0x30 && ch <= 0x39) || (ch >= 0x41 && ch <= 0x5a) || (ch >= 0x61 && ch <= 0x7a);
    if (!alnum && "!#$%&'*+-.^_`|~".indexOf(String.fromCharCode(ch)) < 0) return false;
  }
  return true;
}

/** A request path for sync/report/inference: starts with '/', no query or fragment, no spaces. */
function pathField(c: Cursor, path: string, what: string): string {
  const v = c.str(path);
  if (v === null) return "";
  if (v.length === 0 || v.charCodeAt(0) !== 0x2f) c.fail(`${path}: ${what} starts with '/'`);
  else if (v.indexOf("?") >= 0 || v.indexOf("#") >= 0 || !headerSafe(v, false))
    c.fail(`${path}: ${what} has no query, fragment or spaces`);
  return v;
}

function controlPlaneField(c: Cursor, key: string, path: string): void {
  const b = building;
  if (key === "cluster") {
    b.cluster = c.str(path) || "";
    if (c.err.length === 0 && b.cluster.length === 0) c.fail(`${path}: must not be empty`);
  } else if (key === "authority") {
    const v = c.str(path) || "";
    if (c.err.length === 0 && (v.length === 0 || v.indexOf("/") >= 0 || !headerSafe(v, false)))
      c.fail(`${path}: expected host[:port]`);
    b.authority = v;
  } else if (key === "syncPath") b.syncPath = pathField(c, path, "a path");
  else if (key === "reportPath") b.reportPath = pathField(c, path, "a path");
  else if (key === "token") {
    b.token = c.str(path) || "";
    if (c.err.length === 0 && !headerSafe(b.token, false)) c.fail(`${path}: visible ASCII only`);
  } else if (key === "timeoutMs") b.timeoutMs = positive(c, path, 3600000);
  else c.fail(`${path}: unknown field`);
}

function topField(c: Cursor, key: string, path: string): void {
  const b = building;
  if (key === "controlPlane") c.object(path, controlPlaneField);
  else if (key === "tickMs") b.tickMs = positive(c, path, 60000);
  else if (key === "reportMs") b.reportMs = positive(c, path, 600000);
  else if (key === "maxBodyBytes") {
    const v = c.uint(path, 0xffffffff);
    if (v > <i64>MAX_BODY_BYTES)
      c.fail(
        `${path}: at most ${MAX_BODY_BYTES} (64 MiB): a larger body does not fit the VM's 1 GiB of memory`,
      );
    else if (v === 0) c.fail(`${path}: must be at least 1`);
    b.maxBodyBytes = v < 0 ? 0 : <u32>v;
  } else if (key === "usageScanBytes") {
    const v = c.uint(path, 1 << 30);
    b.usageScanBytes = v < 0 ? 0 : <u32>v;
  } else if (key === "usageScanStreamSample") b.usageScanStreamSample = positive(c, path, 1 << 20);
  else if (key === "gatewayId") {
    b.gatewayId = c.str(path) || "";
    // Sent as the x-kvroute-gateway header of every sync and report call.
    if (c.err.length === 0 && !headerSafe(b.gatewayId, true)) c.fail(`${path}: printable ASCII only`);
  } else if (key === "requestIdHeader") {
    const v = c.str(path) || "";
    // Empty: read no request id.
    if (c.err.length === 0 && v.length > 0 && !isToken(v)) c.fail(`${path}: not a header name`);
    b.requestIdHeader = v.toLowerCase();
  } else if (key === "destinationFallbacks") {
    const v = c.uint(path, MAX_DESTINATION_FALLBACKS);
    b.destinationFallbacks = v < 0 ? 0 : <u32>v;
  } else if (key === "seed") {
    const v = c.uint(path, 0xffffffff);
    b.seed = v < 0 ? 0 : <u32>v;
  } else if (key === "failMode") {
    const v = c.str(path);
    if (v === "open") b.failOpen = true;
    else if (v === "closed") b.failOpen = false;
    else if (v !== null) c.fail(`${path}: expected "open" or "closed"`);
  } else if (key === "inferencePaths") {
    if (!c.expect(0x5b, `${path}: an array of paths`)) return;
    const paths: string[] = [];
    if (c.peek() === 0x5d) c.p++;
    else {
      for (;;) {
        const s = pathField(c, `${path}[${paths.length}]`, "a path");
        if (c.err.length > 0) return;
        paths.push(s);
        const n = c.peek();
        c.p++;
        if (n === 0x5d) break;
        if (n !== 0x2c) {
          c.fail(`${path}: expected ',' or ']'`);
          return;
        }
      }
    }
    if (paths.length === 0) c.fail(`${path}: at least one path`);
    b.inferencePaths = paths;
  } else c.fail(`${path}: unknown field`);
}

/** Parses the configuration bytes; an empty configuration means every default. */
export function parsePluginConfig(ptr: usize, len: i32): PluginConfig | null {
  building = new PluginConfig();
  const c = new Cursor(ptr, ptr + <usize>(len < 0 ? 0 : len));
  if (c.peek() === -1) return building;
  c.object("", topField);
  if (c.err.length === 0 && c.peek() !== -1) c.fail("configuration: trailing characters after the object");
  if (c.err.length > 0) {
    pluginConfigError = c.err;
    return null;
  }
  pluginConfigError = "";
  return building;
}
