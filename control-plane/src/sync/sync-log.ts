// The publication log: every shared-data key the control plane owns, with the global change
// number ("version") of its latest value. A gateway that has applied everything up to version
// V asks for the keys whose version is > V and gets each such key once, at its newest value —
// coalescing falls out of keeping only the latest version per key. Because every key of the
// bounded key space is published at least once per epoch, "changes since 0" is a full
// snapshot, so snapshots and deltas are the same operation.
//
// A value may come with a patch from the key's previous value (bucket images: the rows that
// changed, index/chunk-index.ts publishBucket). The log keeps a key's recent patches while together they
// are smaller than its value; a gateway that asks for patches and holds a value they start from
// gets them joined into one, instead of the value (docs/wire-format.md §5).

export interface SyncEntry {
  key: string;
  /** The key's value, or (patch) the ops that take the gateway's value to it. */
  value: Uint8Array;
  version: number;
  patch?: boolean;
}

/** A change to publish: key, value, and optionally the patch from the key's published value. */
export type SyncChange = [string, Uint8Array] | [string, Uint8Array, Uint8Array];

interface Patches {
  /** The key's version the first patch applies to. */
  base: number;
  list: Array<{ version: number; bytes: Uint8Array }>;
  bytes: number;
}

interface Current {
  value: Uint8Array;
  version: number;
  patches?: Patches;
}

/** A patch's header: slot words u8, reserved u8, op count u16 (filter/core/bucket-patch.ts). */
const PATCH_HEADER = 4;
const MAX_PATCH_OPS = 0xffff;

export class SyncLog {
  readonly #current = new Map<string, Current>();
  /** Keys in the order of their changes; an entry is stale when the key changed again later. */
  #order: Array<{ key: string; version: number }> = [];
  #stale = 0;
  #version = 0;
  readonly #waiters = new Set<() => void>();

  /** Newest version; 0 before the first publication. */
  get version(): number {
    return this.#version;
  }

  get size(): number {
    return this.#current.size;
  }

  get(key: string): Uint8Array | undefined {
    return this.#current.get(key)?.value;
  }

  /**
   * Publishes a batch of key → value changes. A value equal to the published one is skipped,
   * so re-publishing an unchanged image costs the gateways nothing. Returns the new version.
   */
  publish(changes: Iterable<SyncChange>): number {
    let changed = false;
    for (const [key, value, patch] of changes) {
      const old = this.#current.get(key);
      // A patch says the value changed; without one, an unchanged value costs gateways nothing.
      if (old !== undefined && patch === undefined && equalBytes(old.value, value)) continue;
      if (old !== undefined) this.#stale++;
      const version = ++this.#version;
      const patches =
        old !== undefined && patch !== undefined ? keepPatch(old, version, patch, value.length) : undefined;
      this.#current.set(key, patches === undefined ? { value, version } : { value, version, patches });
      this.#order.push({ key, version });
      changed = true;
    }
    if (this.#stale > 1024 && this.#stale > this.#order.length / 2) this.#compact();
    if (changed) this.#wake();
    return this.#version;
  }

  /**
   * The keys changed after `since`, oldest change first, up to `maxBytes` of keys and values
   * (always at least one entry, so a huge value cannot stall a client). `more` says whether
   * the page stopped early; the client then asks again from the last entry's version.
   */
  changesSince(since: number, maxBytes: number, patches = false): { entries: SyncEntry[]; more: boolean } {
    const entries: SyncEntry[] = [];
    let bytes = 0;
    for (let i = this.#firstAfter(since); i < this.#order.length; i++) {
      const { key, version } = this.#order[i] as { key: string; version: number };
      const cur = this.#current.get(key);
      if (cur === undefined || cur.version !== version) continue;
      const patch = patches ? patchSince(cur, since) : null;
      const value = patch ?? cur.value;
      const size = key.length + value.length + 6;
      if (entries.length > 0 && bytes + size > maxBytes) return { entries, more: true };
      bytes += size;
      entries.push(patch === null ? { key, value, version } : { key, value, version, patch: true });
    }
    return { entries, more: false };
  }

  /** Resolves when a version newer than `since` exists, or after `timeoutMs`; returns whether news came. */
  waitForChange(since: number, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.#version > since) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (news: boolean) => {
        clearTimeout(timer);
        this.#waiters.delete(wake);
        signal?.removeEventListener("abort", abort);
        resolve(news);
      };
      const wake = () => done(true);
      const abort = () => done(false);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.#waiters.add(wake);
      signal?.addEventListener("abort", abort, { once: true });
    });
  }

  #wake(): void {
    for (const w of [...this.#waiters]) w();
  }

  /** Index of the first change with version > since (the order is sorted by version). */
  #firstAfter(since: number): number {
    let lo = 0;
    let hi = this.#order.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.#order[mid] as { version: number }).version <= since) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  #compact(): void {
    this.#order = this.#order.filter(({ key, version }) => this.#current.get(key)?.version === version);
    this.#stale = 0;
  }
}

/**
 * The key's patch list after a new patch to `version`: kept while the patches together are
 * smaller than the value (a gateway further behind is better served the value); none when the
 * previous value had no list and no patch (then this patch starts one).
 */
function keepPatch(
  old: Current,
  version: number,
  patch: Uint8Array,
  valueBytes: number,
): Patches | undefined {
  // The old value's entry is replaced by the caller: its list moves on.
  const kept: Patches = old.patches ?? { base: old.version, list: [], bytes: 0 };
  kept.list.push({ version, bytes: patch });
  kept.bytes += patch.length;
  while (kept.list.length > 0 && kept.bytes >= valueBytes) {
    const dropped = kept.list.shift() as { version: number; bytes: Uint8Array };
    kept.bytes -= dropped.bytes.length;
    kept.base = dropped.version;
  }
  return kept.list.length > 0 ? kept : undefined;
}

/**
 * The patches that take a gateway holding the key as of `since` to its value, joined into one
 * (the ops of each in order), or null when the kept patches do not reach back that far.
 */
function patchSince(cur: Current, since: number): Uint8Array | null {
  const p = cur.patches;
  if (p === undefined || since < p.base) return null;
  const parts = p.list.filter((x) => x.version > since).map((x) => x.bytes);
  const first = parts[0];
  if (first === undefined) return null;
  if (parts.length === 1) return first;
  let ops = 0;
  let size = PATCH_HEADER;
  for (const part of parts) {
    ops += (part[2] ?? 0) | ((part[3] ?? 0) << 8);
    size += part.length - PATCH_HEADER;
  }
  if (ops > MAX_PATCH_OPS || size >= cur.value.length) return null;
  const out = new Uint8Array(size);
  out.set(first.subarray(0, PATCH_HEADER));
  out[2] = ops & 0xff;
  out[3] = ops >>> 8;
  let at = PATCH_HEADER;
  for (const part of parts) {
    out.set(part.subarray(PATCH_HEADER), at);
    at += part.length - PATCH_HEADER;
  }
  return out;
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(b);
}
