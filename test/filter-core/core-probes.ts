// Probes into the routing pieces of the core (filter/core/image-probes.ts, exported by the core's
// index) for tests, in their own instance of build/kvroute-core.wasm.
import { readFileSync } from "node:fs";
import { instantiateSync } from "@assemblyscript/loader";

interface RouteExports {
  memory: WebAssembly.Memory;
  routeIoReserve(n: number): number;
  routeOutPtr(): number;
  cfgDecodeIo(len: number): number;
  cfgField(which: number): number;
  cfgPoolField(p: number, which: number): number;
  slotsDecodeIo(len: number): number;
  slotField(s: number, which: number): bigint;
  slotWorkerId(s: number): bigint;
  loadDecodeIo(len: number): number;
  loadField(s: number, which: number): bigint;
  loadAdapterIo(s: number, i: number): number;
  adapterFindIo(len: number): number;
  loraResetIo(): void;
  loraStartedIo(adapter: number, slot: number): void;
  loraCostIo(pool: number, adapter: number, slot: number, nowMs: bigint): number;
  loraHomeIo(pool: number, adapter: number, slot: number): number;
  walkIo(count: number, buckets: number, words: number, slotCount: number, totalLen: number): number;
  walkWeighIo(gpu: number, cpu: number, storage: number): void;
}

const wasm = readFileSync(new URL("../../build/kvroute-core.wasm", import.meta.url));
export const route = instantiateSync<Record<string, unknown>>(wasm, {}).exports as unknown as RouteExports;

export function writeIo(bytes: Uint8Array): void {
  const ptr = route.routeIoReserve(bytes.length);
  new Uint8Array(route.memory.buffer).set(bytes, ptr);
}

/** Runs the prefix walk over bucket images; returns per-slot depths and the number of reads. */
export function walk(
  hashes: bigint[],
  candidates: bigint[],
  images: Map<number, Uint8Array>,
  buckets: number,
  slotCount: number,
) {
  const words = candidates.length;
  const head = hashes.length * 8 + words * 8 + buckets * 8;
  let total = head;
  for (const img of images.values()) total += img.length;
  const buf = new Uint8Array(total);
  const view = new DataView(buf.buffer);
  for (const [i, h] of hashes.entries()) view.setBigUint64(i * 8, h, true);
  for (const [i, c] of candidates.entries()) view.setBigUint64(hashes.length * 8 + i * 8, c, true);
  let at = head;
  const dir = hashes.length * 8 + words * 8;
  for (const [b, img] of images) {
    view.setUint32(dir + b * 8, at, true);
    view.setUint32(dir + b * 8 + 4, img.length, true);
    buf.set(img, at);
    at += img.length;
  }
  writeIo(buf);
  const lookups = route.walkIo(hashes.length, buckets, words, slotCount, total);
  const out = new DataView(route.memory.buffer, route.routeOutPtr(), slotCount * 20);
  return { lookups, depth: Array.from({ length: slotCount }, (_, s) => out.getInt32(s * 4, true)) };
}

/** The walk with tier weights: depths on the GPU, on GPU or CPU, on any tier, and the weighted chunks. */
export function walkTiers(
  hashes: bigint[],
  candidates: bigint[],
  images: Map<number, Uint8Array>,
  buckets: number,
  slotCount: number,
  weights: { gpu: number; cpu: number; storage: number },
) {
  route.walkWeighIo(weights.gpu, weights.cpu, weights.storage);
  const { lookups, depth } = walk(hashes, candidates, images, buckets, slotCount);
  const out = new DataView(route.memory.buffer, route.routeOutPtr(), slotCount * 20);
  const n = slotCount;
  const ints = (from: number) => Array.from({ length: n }, (_, s) => out.getInt32(from + s * 4, true));
  return {
    lookups,
    depth,
    gpu: ints(n * 4),
    cpu: ints(n * 8),
    cached: Array.from({ length: n }, (_, s) => out.getFloat64(n * 12 + s * 8, true)),
  };
}
