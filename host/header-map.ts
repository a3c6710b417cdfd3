// A header map with Envoy's Http::HeaderMapImpl behaviour as the Wasm context uses it (context.cc):
// keys are lower-cased on every access; get returns the first value; add appends; set replaces the
// first entry's value (or appends); remove drops every entry of the key; size() counts entries;
// byteSize() sums key and value lengths (proxy_get_header_map_size returns it).
import type { Pairs } from "./abi/constants.ts";

export class HeaderMap {
  entries: Pairs;

  constructor(pairs: Pairs = []) {
    this.entries = pairs.map(([k, v]) => [k.toLowerCase(), v]);
  }

  get(key: string): string | undefined {
    const k = key.toLowerCase();
    return this.entries.find((e) => e[0] === k)?.[1];
  }

  getAll(key: string): string[] {
    const k = key.toLowerCase();
    return this.entries.filter((e) => e[0] === k).map((e) => e[1]);
  }

  add(key: string, value: string): void {
    this.entries.push([key.toLowerCase(), value]);
  }

  set(key: string, value: string): void {
    const k = key.toLowerCase();
    const e = this.entries.find((x) => x[0] === k);
    if (e) e[1] = value;
    else this.entries.push([k, value]);
  }

  remove(key: string): void {
    const k = key.toLowerCase();
    // Most removals find nothing (a filter strips headers a client may have sent): no new array then.
    if (!this.entries.some((e) => e[0] === k)) return;
    this.entries = this.entries.filter((e) => e[0] !== k);
  }

  replaceAll(pairs: Pairs): void {
    this.entries = pairs.map(([k, v]) => [k.toLowerCase(), v]);
  }

  get size(): number {
    return this.entries.length;
  }

  byteSize(): number {
    let n = 0;
    for (const [k, v] of this.entries) n += Buffer.byteLength(k) + Buffer.byteLength(v);
    return n;
  }

  pairs(): Pairs {
    return this.entries.map(([k, v]) => [k, v]);
  }

  clone(): HeaderMap {
    return new HeaderMap(this.entries);
  }
}
