// Records every callback and the result codes of header/buffer access at each point, with return
// values chosen by the plugin configuration ("reqHeaders=1;reqBody=1,1,0;local=req_body;…").
import {
  addHeader,
  cfgInt,
  getBuffer,
  getHeader,
  localReply,
  log,
  pairsCount,
  parseConfig,
  proxy_continue_stream,
  proxy_set_buffer_bytes,
  proxy_set_effective_context,
  proxy_set_tick_period_milliseconds,
  utf8,
} from "./lib/raw";

export { malloc } from "./lib/raw";

export function proxy_abi_version_0_2_1(): void {}

let cfg = new Map<string, string>();
const paused: u32[] = [];
let bodyCalls = 0;
let respBodyCalls = 0;

function code(key: string, dflt: i32): u32 {
  return <u32>cfgInt(cfg, key, dflt);
}

function nth(key: string, k: i32): u32 {
  if (!cfg.has(key)) return 0;
  const list = cfg.get(key).split(",");
  return <u32>I32.parseInt(list[k < list.length ? k : list.length - 1]);
}

function wants(key: string, value: string): bool {
  return cfg.has(key) && cfg.get(key) === value;
}

export function proxy_on_context_create(id: u32, root: u32): void {
  log(`cb:create ${id.toString()} ${root.toString()}`);
}

export function proxy_on_vm_start(_root: u32, size: u32): u32 {
  const vm = getBuffer(6, 0, size);
  const plugin = getBuffer(7, 0, 100);
  log(
    "cb:vm_start " +
      size.toString() +
      " vm=" +
      vm.code.toString() +
      ":" +
      vm.text +
      " plugin=" +
      plugin.code.toString(),
  );
  return vm.text === "reject-vm" ? 0 : 1;
}

export function proxy_on_configure(_root: u32, size: u32): u32 {
  const b = getBuffer(7, 0, size);
  log(`cb:configure ${size.toString()} ${b.code.toString()} ${b.text}`);
  cfg = parseConfig(b.text);
  if (cfg.has("tick")) proxy_set_tick_period_milliseconds(<u32>cfgInt(cfg, "tick", 0));
  return wants("reject", "1") ? 0 : 1;
}

export function proxy_on_tick(root: u32): void {
  log(`tick root=${root.toString()}`);
  if (paused.length === 0) return;
  const id = paused.shift();
  const e = proxy_set_effective_context(id);
  let extra = "";
  if (wants("tickWrite", "1")) extra = ` add=${addHeader(0, "x-added-on-tick", "yes").toString()}`;
  const c = proxy_continue_stream(wants("resumeResponse", "1") ? 1 : 0);
  log(`cb:tick resume ${id.toString()} eff=${e.toString()} cont=${c.toString()}${extra}`);
}

export function proxy_on_request_headers(id: u32, n: u32, eos: u32): u32 {
  const path = getHeader(0, ":path");
  const cfgRead = getBuffer(7, 0, 10);
  let extra = "";
  if (cfg.has("setDest"))
    extra += ` dest=${addHeader(0, "x-gateway-destination-endpoint", cfg.get("setDest")).toString()}`;
  if (wants("local", "req_headers"))
    extra += ` local=${localReply(403, "denied by wasm", "x-wasm", "local").toString()}`;
  log(
    "cb:req_headers " +
      id.toString() +
      " " +
      n.toString() +
      " " +
      eos.toString() +
      " path=" +
      path.code.toString() +
      ":" +
      path.text +
      " plugincfg=" +
      cfgRead.code.toString() +
      extra,
  );
  const r = code("reqHeaders", 0);
  if (r !== 0 && cfg.has("tick")) paused.push(id);
  return r;
}

export function proxy_on_request_body(id: u32, size: u32, eos: u32): u32 {
  const h = getHeader(0, ":path");
  const b = getBuffer(0, 0, size);
  let extra = "";
  if (wants("rewriteBody", "1") && eos !== 0) {
    const nb = utf8(`rewritten:${b.text}`);
    extra += ` set=${proxy_set_buffer_bytes(0, 0, size, changetype<usize>(nb), nb.byteLength).toString()}`;
  }
  if (wants("local", "req_body") && eos !== 0)
    extra += ` local=${localReply(401, "body refused", "x-wasm", "local").toString()}`;
  log(
    "cb:req_body " +
      id.toString() +
      " " +
      size.toString() +
      " " +
      eos.toString() +
      " hdr=" +
      h.code.toString() +
      " buf=" +
      b.code.toString() +
      ":" +
      b.text.length.toString() +
      extra,
  );
  const r = nth("reqBody", bodyCalls++);
  if (r !== 0 && cfg.has("tick") && eos !== 0) paused.push(id);
  return r;
}

export function proxy_on_request_trailers(id: u32, n: u32): u32 {
  log(`cb:req_trailers ${id.toString()} ${n.toString()}`);
  return code("reqTrailers", 0);
}

export function proxy_on_response_headers(id: u32, n: u32, eos: u32): u32 {
  const st = getHeader(2, ":status");
  const req = getHeader(0, ":path");
  const add = addHeader(2, "x-wasm-thread-ctx", id.toString());
  const addReq = addHeader(0, "x-late", "1");
  log(
    "cb:resp_headers " +
      id.toString() +
      " " +
      n.toString() +
      " " +
      eos.toString() +
      " status=" +
      st.code.toString() +
      ":" +
      st.text +
      " reqhdr=" +
      req.code.toString() +
      " add=" +
      add.toString() +
      " addreq=" +
      addReq.toString() +
      " reqpairs=" +
      pairsCount(0).toString(),
  );
  const r = code("respHeaders", 0);
  if (r !== 0 && cfg.has("tick")) paused.push(id);
  return r;
}

export function proxy_on_response_body(id: u32, size: u32, eos: u32): u32 {
  const b = getBuffer(1, 0, size);
  log(
    "cb:resp_body " +
      id.toString() +
      " " +
      size.toString() +
      " " +
      eos.toString() +
      " buf=" +
      b.code.toString() +
      ":" +
      b.text,
  );
  return nth("respBody", respBodyCalls++);
}

export function proxy_on_response_trailers(id: u32, n: u32): u32 {
  log(`cb:resp_trailers ${id.toString()} ${n.toString()}`);
  return 0;
}

export function proxy_on_log(id: u32): void {
  const p = getHeader(0, ":path");
  const s = getHeader(2, ":status");
  const w = addHeader(0, "x-in-log", "1");
  log(
    "cb:log " +
      id.toString() +
      " path=" +
      p.code.toString() +
      ":" +
      p.text +
      " status=" +
      s.code.toString() +
      ":" +
      s.text +
      " write=" +
      w.toString(),
  );
}

export function proxy_on_done(id: u32): u32 {
  const p = getHeader(0, ":path");
  log(`cb:done ${id.toString()} path=${p.code.toString()}`);
  return 1;
}

export function proxy_on_delete(id: u32): void {
  log(`cb:delete ${id.toString()}`);
}
