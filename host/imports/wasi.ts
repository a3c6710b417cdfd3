// The WASI subset Envoy provides (proxy-wasm-cpp-host src/exports.cc, wasi_unstable_*): fd_write
// to fd 1/2 becomes a log line at info/error (one trailing newline dropped); environ comes from
// vm_config.environment_variables; args are empty; clocks 0 (realtime) and 1 (monotonic);
// random_get up to 64 KiB; everything file-system-like answers the errno the host answers.
// proc_exit only logs at trace in Envoy (Context::error) — it does not stop the module.
// During _start only ALLOWED_DURING_START may run; anything else traps "restricted_callback".
import { Errno, LogLevel } from "../abi/constants.ts";
import { decodeUtf8, encodeUtf8 } from "../abi/memory.ts";
import { ALLOWED_DURING_START, HOST_SIGNATURES } from "../abi/signatures.ts";
import type { WasmThread } from "../thread.ts";

type Fn = (...a: Array<number | bigint>) => number | undefined;

const RANDOM_MAX = 64 * 1024;
const monoStart = process.hrtime.bigint();

export function restrictedGuard(t: WasmThread, full: string, f: Fn): Fn {
  // Allowed during _start: nothing to check, the function itself is the import.
  if (ALLOWED_DURING_START.has(full)) return f;
  // Parameters passed on by name, not with a rest array or `arguments`: this runs on every host
  // call, and an array per call is a cost Envoy's host functions do not have. Twelve covers the
  // widest ABI function (proxy_http_call has ten); the extra ones arrive undefined and are ignored.
  return function guarded(a, b, c, d, e, g, h, i, j, k, l, m) {
    // V8::registerHostFunctionImpl: a restricted call traps the VM.
    if (t.restricted) throw new WebAssembly.RuntimeError("restricted_callback");
    return f(
      a as number | bigint,
      b as number | bigint,
      c as number | bigint,
      d as number | bigint,
      e as number | bigint,
      g as number | bigint,
      h as number | bigint,
      i as number | bigint,
      j as number | bigint,
      k as number | bigint,
      l as number | bigint,
      m as number | bigint,
    );
  };
}

function writev(
  t: WasmThread,
  fd: number,
  iovs: number,
  iovsLen: number,
): { errno: number; written: number } {
  let level: number;
  if (fd === 1) level = LogLevel.info;
  else if (fd === 2) level = LogLevel.error;
  else return { errno: Errno.BADF, written: 0 };
  const parts: Uint8Array[] = [];
  for (let k = 0; k < iovsLen; k++) {
    const iov = t.mem.read(iovs + k * 8, 8);
    if (iov === null) return { errno: Errno.FAULT, written: 0 };
    const dv = new DataView(iov.buffer);
    const len = dv.getUint32(4, true);
    if (len === 0) continue;
    const data = t.mem.read(dv.getUint32(0, true), len);
    if (data === null) return { errno: Errno.FAULT, written: 0 };
    parts.push(data);
  }
  const all = Buffer.concat(parts);
  if (all.length > 0) {
    let s = decodeUtf8(all);
    if (s.endsWith("\n")) s = s.slice(0, -1);
    t.core.log({ thread: t.name, level, message: s, contextId: t.current().id });
  }
  return { errno: Errno.SUCCESS, written: all.length };
}

export function wasiImports(t: WasmThread): Record<string, Fn> {
  const n = (x: number | bigint | undefined) => Number(x ?? 0) >>> 0;
  const stdio = (fd: number) => fd === 1 || fd === 2;
  const impl: Record<string, Fn> = {
    fd_write: (fd, iovs, len, nwritten) => {
      const r = writev(t, n(fd), n(iovs), n(len));
      if (r.errno !== 0) return r.errno;
      return t.mem.writeU32(n(nwritten), r.written) ? Errno.SUCCESS : Errno.FAULT;
    },
    fd_read: () => Errno.NOSYS,
    fd_seek: () => 0,
    fd_close: () => 0,
    fd_fdstat_get: (fd, out) => {
      if (!stdio(n(fd))) return Errno.BADF;
      const b = new Uint8Array(24);
      new DataView(b.buffer).setBigUint64(8, 64n, true);
      t.mem.write(n(out), b);
      return Errno.SUCCESS;
    },
    fd_fdstat_set_flags: () => Errno.NOSYS,
    fd_fdstat_set_rights: () => Errno.NOTSUP,
    environ_get: (arr, buf) => {
      let a = n(arr);
      let b = n(buf);
      for (const [k, v] of Object.entries(t.core.envs)) {
        const data = encodeUtf8(`${k}=${v}\0`);
        if (!t.mem.writeU32(a, b) || !t.mem.write(b, data)) return Errno.FAULT;
        a += 4;
        b += data.length;
      }
      return Errno.SUCCESS;
    },
    environ_sizes_get: (countPtr, sizePtr) => {
      const entries = Object.entries(t.core.envs);
      const size = entries.reduce((s, [k, v]) => s + Buffer.byteLength(k) + Buffer.byteLength(v) + 2, 0);
      return t.mem.writeU32(n(countPtr), entries.length) && t.mem.writeU32(n(sizePtr), size)
        ? Errno.SUCCESS
        : Errno.FAULT;
    },
    args_get: () => Errno.SUCCESS,
    args_sizes_get: (argc, size) =>
      t.mem.writeU32(n(argc), 0) && t.mem.writeU32(n(size), 0) ? Errno.SUCCESS : Errno.FAULT,
    clock_time_get: (id, _precision, out) => {
      let v: bigint;
      if (n(id) === 0) v = BigInt(Date.now()) * 1_000_000n;
      else if (n(id) === 1) v = process.hrtime.bigint() - monoStart;
      else return Errno.NOTSUP;
      return t.mem.writeU64(n(out), v) ? Errno.SUCCESS : Errno.FAULT;
    },
    clock_res_get: (id, out) => {
      if (n(id) > 1) return Errno.NOTSUP;
      return t.mem.writeU64(n(out), 1n) ? Errno.SUCCESS : Errno.FAULT;
    },
    fd_advise: () => Errno.SUCCESS,
    fd_allocate: (fd) => (stdio(n(fd)) ? Errno.SUCCESS : Errno.BADF),
    fd_datasync: (fd) => (stdio(n(fd)) ? Errno.SUCCESS : Errno.BADF),
    fd_filestat_set_size: (fd) => (stdio(n(fd)) ? Errno.SUCCESS : Errno.BADF),
    fd_filestat_set_times: (fd) => (stdio(n(fd)) ? Errno.SUCCESS : Errno.BADF),
    fd_pread: () => Errno.NOSYS,
    fd_pwrite: (fd, iovs, len, _off, nwritten) => {
      const r = writev(t, n(fd), n(iovs), n(len));
      if (r.errno !== 0) return r.errno;
      return t.mem.writeU32(n(nwritten), r.written) ? Errno.SUCCESS : Errno.FAULT;
    },
    fd_readdir: (_fd, _buf, _len, _cookie, nread) => (t.mem.writeU32(n(nread), 0) ? 20 : Errno.FAULT),
    fd_renumber: (fd, to) => (stdio(n(fd)) && stdio(n(to)) ? Errno.NOTSUP : Errno.BADF),
    fd_sync: (fd) => (stdio(n(fd)) ? Errno.SUCCESS : Errno.BADF),
    fd_tell: (fd, out) => {
      if (!stdio(n(fd))) return Errno.BADF;
      return t.mem.writeU64(n(out), 0n) ? Errno.SUCCESS : Errno.FAULT;
    },
    path_create_directory: () => Errno.NOTSUP,
    path_filestat_set_times: () => Errno.NOTSUP,
    path_link: () => Errno.NOTSUP,
    path_readlink: (_a, _b, _c, _d, _e, ret) => (t.mem.writeU32(n(ret), 0) ? Errno.NOTSUP : Errno.FAULT),
    path_remove_directory: () => Errno.NOTSUP,
    path_rename: () => Errno.NOTSUP,
    path_symlink: () => Errno.NOTSUP,
    path_unlink_file: () => Errno.NOTSUP,
    sock_accept: (_fd, _flags, ret) => (t.mem.writeU32(n(ret), 0) ? Errno.NOTSUP : Errno.FAULT),
    sock_recv: (_a, _b, _c, _d, ret0) => (t.mem.writeU32(n(ret0), 0) ? Errno.NOTSUP : Errno.FAULT),
    sock_send: (_a, _b, _c, _d, ret0) => (t.mem.writeU32(n(ret0), 0) ? Errno.NOTSUP : Errno.FAULT),
    sock_shutdown: () => Errno.NOTSUP,
    random_get: (buf, len) => {
      const l = n(len);
      if (l > RANDOM_MAX) return Errno.INVAL;
      if (l === 0) return Errno.SUCCESS;
      const bytes = new Uint8Array(l);
      crypto.getRandomValues(bytes);
      return t.mem.write(n(buf), bytes) ? Errno.SUCCESS : Errno.FAULT;
    },
    sched_yield: () => Errno.SUCCESS,
    poll_oneoff: (_in, _out, _n, nevents) => (t.mem.writeU32(n(nevents), 0) ? Errno.SUCCESS : Errno.FAULT),
    proc_exit: () => {
      t.core.log({ thread: t.name, level: LogLevel.trace, message: "wasi_unstable proc_exit", contextId: 0 });
      return undefined;
    },
    path_open: () => Errno.NOENT,
    fd_prestat_get: () => Errno.BADF,
    fd_prestat_dir_name: () => Errno.NOSYS,
    path_filestat_get: () => Errno.NOTSUP,
    fd_filestat_get: () => Errno.BADF,
  };
  const out: Record<string, Fn> = {};
  for (const [name, f] of Object.entries(impl)) {
    // Both module names share one implementation; the guard uses the snapshot name, which has
    // the same allow-list entry as wasi_unstable.
    if (!HOST_SIGNATURES.has(`wasi_snapshot_preview1.${name}`)) throw new Error(`no signature for ${name}`);
    out[name] = restrictedGuard(t, `wasi_snapshot_preview1.${name}`, f);
  }
  return out;
}
