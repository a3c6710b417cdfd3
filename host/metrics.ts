// Envoy's Wasm metrics (source/extensions/common/wasm/context.cc defineMetric/incrementMetric/
// recordMetric/getMetric; ids from wasm.h): stats live in the process-wide store by name, so every
// thread's VM that defines "x" shares one counter, like Envoy's /stats shows it. Metric ids are
// per VM: the low two bits are the type (0 counter, 1 gauge, 2 histogram) and each new name adds 4;
// defining a (type, name) again on the same VM returns the same id (newer Envoy,
// test/extensions/common/wasm custom-metrics tests "DefineReturnsSameIdForSameName").
// Counter: increment needs offset > 0 (else BadArgument); record adds. Gauge: increment adds or
// subtracts; record sets. Histogram: record only; increment/get → BadArgument. Unknown id →
// NotFound. Type > 2 → BadArgument.
import { MetricType, WasmResult } from "./abi/constants.ts";

export interface HistogramValue {
  count: number;
  sum: bigint;
  values: bigint[];
}

export type MetricKind = "counter" | "gauge" | "histogram";

export class StatsStore {
  readonly counters = new Map<string, bigint>();
  readonly gauges = new Map<string, bigint>();
  readonly histograms = new Map<string, HistogramValue>();

  counter(name: string): bigint | undefined {
    return this.counters.get(name);
  }
  gauge(name: string): bigint | undefined {
    return this.gauges.get(name);
  }
  histogram(name: string): HistogramValue | undefined {
    return this.histograms.get(name);
  }

  /**
   * Text in the shape of Envoy's /stats: Wasm metrics live under the "wasmcustom." namespace
   * (Extensions::Common::Wasm::CustomStatNamespace, registered by the Wasm filter factory).
   */
  dump(): string {
    const lines: string[] = [];
    for (const [n, v] of this.counters) lines.push(`wasmcustom.${n}: ${v}`);
    for (const [n, v] of this.gauges) lines.push(`wasmcustom.${n}: ${v}`);
    for (const [n, h] of this.histograms) lines.push(`wasmcustom.${n}: count=${h.count} sum=${h.sum}`);
    return lines.sort().join("\n");
  }

  /** Prometheus text: a registered custom namespace is stripped and gets no envoy_ prefix. */
  prometheus(): string {
    const clean = (n: string) => n.replace(/[^a-zA-Z0-9_:]/g, "_");
    const out: string[] = [];
    for (const [n, v] of this.counters) out.push(`# TYPE ${clean(n)} counter`, `${clean(n)}{} ${v}`);
    for (const [n, v] of this.gauges) out.push(`# TYPE ${clean(n)} gauge`, `${clean(n)}{} ${v}`);
    for (const [n, h] of this.histograms) {
      out.push(
        `# TYPE ${clean(n)} histogram`,
        `${clean(n)}_count{} ${h.count}`,
        `${clean(n)}_sum{} ${h.sum}`,
      );
    }
    return `${out.join("\n")}\n`;
  }
}

const TYPE_MASK = 0x3;
const ID_INCREMENT = 4;

/** One VM's view: its own id space over the shared store. */
export class VmMetrics {
  private readonly names = new Map<number, string>();
  private readonly ids = new Map<string, number>();
  private next: number[] = [MetricType.Counter, MetricType.Gauge, MetricType.Histogram];

  constructor(private readonly store: StatsStore) {}

  define(type: number, name: string): { code: number; id?: number } {
    if (type > MetricType.Histogram || type < 0) return { code: WasmResult.BadArgument };
    const known = this.ids.get(`${type}\u0000${name}`);
    if (known !== undefined) return { code: WasmResult.Ok, id: known };
    this.next[type] = (this.next[type] as number) + ID_INCREMENT;
    const id = this.next[type] as number;
    this.names.set(id, name);
    this.ids.set(`${type}\u0000${name}`, id);
    if (type === MetricType.Counter && !this.store.counters.has(name)) this.store.counters.set(name, 0n);
    if (type === MetricType.Gauge && !this.store.gauges.has(name)) this.store.gauges.set(name, 0n);
    if (type === MetricType.Histogram && !this.store.histograms.has(name))
      this.store.histograms.set(name, { count: 0, sum: 0n, values: [] });
    return { code: WasmResult.Ok, id };
  }

  increment(id: number, offset: bigint): number {
    const type = id & TYPE_MASK;
    const name = this.names.get(id);
    if (type === MetricType.Counter) {
      if (name === undefined) return WasmResult.NotFound;
      if (offset <= 0n) return WasmResult.BadArgument;
      this.store.counters.set(name, BigInt.asUintN(64, (this.store.counters.get(name) ?? 0n) + offset));
      return WasmResult.Ok;
    }
    if (type === MetricType.Gauge) {
      if (name === undefined) return WasmResult.NotFound;
      this.store.gauges.set(name, BigInt.asUintN(64, (this.store.gauges.get(name) ?? 0n) + offset));
      return WasmResult.Ok;
    }
    return WasmResult.BadArgument;
  }

  record(id: number, value: bigint): number {
    const type = id & TYPE_MASK;
    const name = this.names.get(id);
    if (name === undefined) return WasmResult.NotFound;
    if (type === MetricType.Counter) {
      this.store.counters.set(name, BigInt.asUintN(64, (this.store.counters.get(name) ?? 0n) + value));
    } else if (type === MetricType.Gauge) {
      this.store.gauges.set(name, value);
    } else if (type === MetricType.Histogram) {
      const h = this.store.histograms.get(name) as HistogramValue;
      h.count++;
      h.sum += value;
      if (h.values.length < 10_000) h.values.push(value);
    } else return WasmResult.NotFound;
    return WasmResult.Ok;
  }

  get(id: number): { code: number; value?: bigint } {
    const type = id & TYPE_MASK;
    const name = this.names.get(id);
    if (type === MetricType.Counter || type === MetricType.Gauge) {
      if (name === undefined) return { code: WasmResult.NotFound };
      const m = type === MetricType.Counter ? this.store.counters : this.store.gauges;
      return { code: WasmResult.Ok, value: m.get(name) ?? 0n };
    }
    return { code: WasmResult.BadArgument };
  }
}
