// The control-plane-owned shared-data images other than buckets (docs/wire-format.md §4):
// `kvr.cfg`, `kvr.slots`, `kvr.load`. The filter decodes them once per change, never per
// request, so they favour simple fixed layouts over compactness.

import { ByteWriter } from "../common/byte-writer.ts";
import type { Config } from "../config/schema.ts";
import { xxh64 } from "../core/kvroute-core.ts";
import type { SlotLoad, SlotLora } from "../model/slot-load.ts";
import type { Slot } from "../model/slot-table.ts";
import type { PoolRendering } from "../pools/pool-tokens.ts";

/** 2: kvr.cfg carries tier weights; bucket rows carry a tier (docs/wire-format.md §4). */
export const IMAGE_PROTOCOL = 2;
/** 3: kvr.cfg ends with the session-affinity settings, then the LoRA costs and each pool's
 * adapter table (docs/wire-format.md §4.1; kvr.slots and kvr.load stay at 2). */
export const CFG_PROTOCOL = 3;
export const CFG_MAGIC = 0x4352564b; // "KVRC"
export const SLOTS_MAGIC = 0x5452564b; // "KVRT"
export const LOAD_MAGIC = 0x4c52564b; // "KVRL"
export const ROSTER_MAGIC = 0x4752564b; // "KVRG"
export const ROSTER_PROTOCOL = 1;
/** A roster lists at most this many gateways (its count is a u16). */
export const ROSTER_MAX = 0xffff;
/** 16 bytes of load, then the slot's LoRA adapters (20 bytes, docs/wire-format.md §4.3). */
export const LOAD_STRIDE = 36;
/** Loaded adapters listed per slot in kvr.load; more are counted but not named. */
export const LOAD_ADAPTER_IDS = 8;
/** An adapter id for a name the pool's table does not have. */
const NO_ADAPTER_ID = 0xffff;

const ENGINE = { vllm: 0, sglang: 1, dynamo: 2 } as const;
const DP_MODE = { internal: 0, hybrid: 1, external: 2 } as const;
const POLICY = { "kv-aware": 0, "least-load": 1, "round-robin": 2, random: 3 } as const;
const RANK_POLICY = { ignore: 0, honor: 1, reject: 2 } as const;
const ROLE = { aggregated: 0, prefill: 1, decode: 2 } as const;

export function encodeCfgImage(
  cfg: Config,
  slotWords: number,
  rendering: Map<string, PoolRendering>,
  adapters: (pool: string) => readonly string[] = (pool) =>
    cfg.pools.find((p) => p.name === pool)?.adapters ?? [],
): Uint8Array {
  const r = cfg.routing;
  const w = new ByteWriter().u32(CFG_MAGIC).u16(CFG_PROTOCOL).u16(0);
  w.u32(r.chunkSize)
    .u32(cfg.cache.buckets)
    .u16(cfg.cache.ways)
    .u16(slotWords)
    .u32(cfg.cache.speculativeTtlMs)
    .u32(r.maxBodyBytes);
  w.f32(r.overlapWeight).f32(r.decodeWeight).f32(r.inflightWeight).f32(r.temperature);
  w.f32(r.tierWeights.gpu).f32(r.tierWeights.cpu).f32(r.tierWeights.storage);
  const defaultPool = r.defaultPool === undefined ? -1 : cfg.pools.findIndex((p) => p.name === r.defaultPool);
  w.u8(RANK_POLICY[r.rankHeaderPolicy.mode])
    .u8(r.failMode === "open" ? 0 : 1)
    .i16(defaultPool);
  w.str16(r.rankHeaderPolicy.secretHeader?.name ?? "").str16(r.rankHeaderPolicy.secretHeader?.value ?? "");
  w.u16(r.rankHeaderPolicy.trustedCidrs.length);
  for (const cidr of r.rankHeaderPolicy.trustedCidrs) w.str16(cidr);
  w.u16(cfg.pools.length);
  for (const pool of cfg.pools) {
    const disaggregated = pool.endpoints.some((e) => e.role !== "aggregated");
    const flags =
      (pool.sglangBodyRank ? 1 : 0) | (pool.dynamoLegacyHeaders ? 2 : 0) | (disaggregated ? 4 : 0);
    w.str16(pool.name)
      .u8(ENGINE[pool.engine])
      .u8(DP_MODE[pool.dpMode])
      .u8(POLICY[pool.policy])
      .u8(flags)
      .u16(pool.blockSize);
    w.u16(pool.models.length);
    for (const m of pool.models) w.str16(m);
    const derived = rendering.get(pool.name);
    w.str16(derived?.bosText ?? "").blob32(derived?.segmentTemplate ?? new Uint8Array());
    const shed = pool.shedding;
    w.u8(shed.enabled ? 1 : 0)
      .u8(0)
      .u16(shed.retryAfterSeconds)
      .u16(shed.standard.maxQueued)
      .u16(permille(shed.standard.maxKvUsage))
      .u16(shed.sheddable.maxQueued)
      .u16(permille(shed.sheddable.maxKvUsage));
  }
  w.str16(r.priorityHeader);
  w.str16(r.sessionHeader).f32(r.sessionMargin).u32(r.sessionTtlMs);
  // Protocol 3: adapter affinity's costs, then every pool's adapter table (ids = positions).
  w.f32(r.lora.loadCost).f32(r.lora.fullCost);
  for (const pool of cfg.pools) {
    const names = adapters(pool.name);
    w.u16(names.length);
    for (const a of names) w.str16(a);
  }
  return w.finish();
}

/** A 0–1 fraction as the load image writes KV usage: per mille, rounded. */
const permille = (v: number) => Math.max(0, Math.min(1000, Math.round(v * 1000)));

export function encodeSlotsImage(slots: readonly Slot[], poolIndex: (name: string) => number): Uint8Array {
  const w = new ByteWriter().u32(SLOTS_MAGIC).u16(IMAGE_PROTOCOL).u16(slots.length);
  for (const s of slots) {
    w.u16(poolIndex(s.pool))
      .u8((s.present ? 1 : 0) | (ROLE[s.role] << 1))
      .u8(0)
      .u32(s.globalRank)
      .i32(s.headerRank ?? -1)
      .u64(s.workerId ?? 0n)
      .str16(s.address);
  }
  return w.finish();
}

export function encodeLoadImage(
  slots: readonly Slot[],
  loadOf: (slot: number) => SlotLoad,
  adapterId: (pool: string, adapter: string) => number = () => -1,
): Uint8Array {
  const w = new ByteWriter().u32(LOAD_MAGIC).u16(IMAGE_PROTOCOL).u16(slots.length).u16(LOAD_STRIDE).u16(0);
  const clamp16 = (v: number) => Math.max(0, Math.min(0xffff, Math.round(v)));
  const clamp32 = (v: number) => Math.max(0, Math.min(0xffffffff, Math.round(v)));
  for (const s of slots) {
    const l = loadOf(s.id);
    w.u8(l.healthy && s.present ? 1 : 0)
      .u8(0)
      .u16(clamp16(l.running))
      .u16(clamp16(l.waiting))
      .u16(clamp16(l.kvUsage * 1000))
      .u32(clamp32(l.inflight))
      .u32(clamp32(l.ttftMs));
    writeSlotAdapters(w, l.lora, (name) => adapterId(s.pool, name));
  }
  return w.finish();
}

/**
 * maxLoras u8 (0: the engine reports no LoRA), adapters active u8 (running or waiting, distinct,
 * named or not), listed u8, running bits u8 (bit i: listed adapter i has running requests), then
 * LOAD_ADAPTER_IDS u16 ids (running ones first; 0xffff = not in the pool's table; unused = 0xffff).
 */
function writeSlotAdapters(w: ByteWriter, lora: SlotLora | null, idOf: (name: string) => number): void {
  if (lora === null) {
    w.u8(0).u8(0).u8(0).u8(0);
    for (let i = 0; i < LOAD_ADAPTER_IDS; i++) w.u16(NO_ADAPTER_ID);
    return;
  }
  const active = [...new Set([...lora.running, ...lora.waiting])];
  const running = new Set(lora.running);
  // Running ones first: they are the adapters certainly in GPU memory.
  active.sort((a, b) => Number(running.has(b)) - Number(running.has(a)));
  const listed = active.slice(0, LOAD_ADAPTER_IDS);
  let bits = 0;
  listed.forEach((a, i) => {
    if (running.has(a)) bits |= 1 << i;
  });
  w.u8(Math.min(255, lora.maxLoras)).u8(Math.min(255, active.length)).u8(listed.length).u8(bits);
  for (let i = 0; i < LOAD_ADAPTER_IDS; i++) {
    const id = i < listed.length ? idOf(listed[i] as string) : -1;
    w.u16(id >= 0 && id < NO_ADAPTER_ID ? id : NO_ADAPTER_ID);
  }
}

/** XXH64 seed of a gateway's id in kvr.gw: the filter hashes its own id alike (root.ts). */
const GATEWAY_HASH_SEED = 0x4741544557415953n;
const utf8 = new TextEncoder();

/** A gateway's id as kvr.gw lists it: XXH64 of its UTF-8 bytes, never 0. */
export function gatewayHash(id: string): bigint {
  const h = xxh64(utf8.encode(id), GATEWAY_HASH_SEED);
  return h === 0n ? 1n : h;
}

/**
 * kvr.gw (docs/wire-format.md §4.7): the gateways that report now, as their id hashes in ascending
 * order. Each gateway finds its own place in it and prefers its share of every pool's slots
 * (filter/core/route-decision.ts partition), so independent gateways rarely pick the same slot
 * at the same moment.
 */
export function encodeRosterImage(gatewayIds: readonly string[]): Uint8Array {
  const hashes = [...new Set(gatewayIds.map(gatewayHash))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const listed = hashes.slice(0, ROSTER_MAX);
  const w = new ByteWriter().u32(ROSTER_MAGIC).u16(ROSTER_PROTOCOL).u16(listed.length);
  for (const h of listed) w.u64(h);
  return w.finish();
}
