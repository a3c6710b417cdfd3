// Root contexts as Envoy creates them: one per plugin configuration ("name=A;tick=10;…"), each
// with its own state here. Logs every root callback with the root's name, so tests see which root
// a tick, an http-call answer or a stream went to.
//   tick=<ms>       tick period of this root
//   call=<cluster>  on its first tick, the root calls GET /<name> on that cluster
//   race=1          on every tick: read key "race"; when absent, set it (cas 0) and log the result
//   doneLater=1     on_done returns false; the next tick calls proxy_done
//   count=<cas>     in on_configure: claim a number from key "count" — read it (absent = 0), write it
//                   + 1 by CAS on the cas read, over an absent key with cas <cas>; retry on
//                   CasMismatch (at most 8 tries) — and log the number and the tries
import { proxy_done } from "./lib/env";
import {
  getBuffer,
  getHeader,
  httpCall,
  lastCas,
  log,
  OUT_U32,
  parseConfig,
  proxy_set_tick_period_milliseconds,
  sharedGet,
  sharedSet,
} from "./lib/raw";

export { malloc } from "./lib/raw";

export function proxy_abi_version_0_2_1(): void {}

class Root {
  cfg: Map<string, string> = new Map();
  name: string = "?";
  called: bool = false;
  token: u32 = 0;
  doneAsked: bool = false;
}

const roots = new Map<u32, Root>();
const streamRoot = new Map<u32, u32>();

function nameOf(id: u32): string {
  return roots.has(id) ? roots.get(id).name : "none";
}

export function proxy_on_context_create(id: u32, parent: u32): void {
  if (parent === 0) roots.set(id, new Root());
  else streamRoot.set(id, parent);
  log(`create ${id.toString()} parent=${parent.toString()}`);
}

export function proxy_on_vm_start(root: u32, _size: u32): u32 {
  log(`vm_start root=${root.toString()}`);
  return 1;
}

export function proxy_on_configure(root: u32, size: u32): u32 {
  const text = getBuffer(7, 0, size).text;
  const r = roots.get(root);
  r.cfg = parseConfig(text);
  r.name = r.cfg.has("name") ? r.cfg.get("name") : "?";
  log(`configure root=${root.toString()} name=${r.name}`);
  if (r.cfg.has("tick")) proxy_set_tick_period_milliseconds(<u32>I32.parseInt(r.cfg.get("tick")));
  if (r.cfg.has("count")) claimNumber(root, r.name, <u32>U32.parseInt(r.cfg.get("count")));
  return r.cfg.has("reject") ? 0 : 1;
}

function claimNumber(root: u32, name: string, absentCas: u32): void {
  for (let tries = 1; tries <= 8; tries++) {
    const cur = sharedGet("count");
    const got = cur.code === 0 ? I32.parseInt(cur.text) : 0;
    const cas = cur.code === 0 ? lastCas() : absentCas;
    const code = sharedSet("count", (got + 1).toString(), cas);
    if (code === 0 || tries === 8) {
      log(
        `count root=${root.toString()} name=${name} got=${got.toString()} tries=${tries.toString()} set=${code.toString()}`,
      );
      return;
    }
  }
}

export function proxy_on_tick(root: u32): void {
  const r = roots.get(root);
  log(`tick root=${root.toString()} name=${r.name}`);
  if (r.doneAsked) {
    log(`proxy_done root=${root.toString()} -> ${proxy_done().toString()}`);
    return;
  }
  if (r.cfg.has("call") && !r.called) {
    r.called = true;
    const code = httpCall(
      r.cfg.get("call"),
      [":method", ":path", ":authority"],
      ["GET", `/${r.name}`, "roots.test"],
      "",
      5000,
    );
    r.token = load<u32>(OUT_U32);
    log(`call root=${root.toString()} name=${r.name} code=${code.toString()} token=${r.token.toString()}`);
  }
  if (r.cfg.has("race")) {
    const cur = sharedGet("race");
    if (cur.code === 1) {
      const won = sharedSet("race", r.name, 0);
      log(`race root=${root.toString()} name=${r.name} set=${won.toString()}`);
    }
  }
}

export function proxy_on_http_call_response(root: u32, token: u32, _nh: u32, bodySize: u32, _nt: u32): void {
  const r = roots.get(root);
  const body = getBuffer(4, 0, bodySize).text;
  log(
    `response root=${root.toString()} name=${r.name} token=${token.toString()} own=${(token === r.token).toString()} body=${body}`,
  );
}

export function proxy_on_request_headers(id: u32, _n: u32, _eos: u32): u32 {
  const parent = streamRoot.has(id) ? streamRoot.get(id) : 0;
  log(
    `headers ${id.toString()} root=${parent.toString()} name=${nameOf(parent)} path=${getHeader(0, ":path").text}`,
  );
  return 0;
}

export function proxy_on_done(id: u32): u32 {
  if (!roots.has(id)) return 1;
  const r = roots.get(id);
  log(`done root=${id.toString()} name=${r.name}`);
  if (r.cfg.has("doneLater")) {
    r.doneAsked = true;
    return 0;
  }
  return 1;
}

export function proxy_on_delete(id: u32): void {
  if (roots.has(id)) {
    log(`delete root=${id.toString()} name=${nameOf(id)}`);
    roots.delete(id);
  } else streamRoot.delete(id);
}
