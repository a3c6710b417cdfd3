// The publication log: every shared-data key the control plane owns, with the global change
// number ("version") of its latest value. A gateway that has applied everything up to version
// V asks for the keys whose version is > V and gets each such key once, at its newest value —
// coalescing falls out of keeping only the latest version per key. Because every key of the
// bounded key space is published at least once per epoch, "changes since 0" is a full
// snapshot, so snapshots and deltas are the same operation.
//
// Two kinds of keys. A few hundred named keys (kvr.cfg, kvr.load, sessions…) keep their values
// here. The prefix-index buckets — tens of thousands, most of them changing every poll — live
// in a key table (index/published-buckets.ts: the core's published images and their patch
// journal), and the log keeps only their versions, in typed arrays: publishing a bucket costs
// the log no JavaScript object. A gateway that asks for patches gets a changed bucket as the
// patch from the image it holds when the table still has it (docs/wire-format.md §5.1).

import type { WrittenEntries } from "../index/published-buckets.ts";
import { PageBuffer } from "./page-buffer.ts";
import { SYNC_HEADER_BYTES, SyncFlags, writeSyncHeader } from "./sync-codec.ts";

export interface SyncEntry {
  key: string;
  /** The key's value, or (patch) the ops that take the gateway's value to it. */
  value: Uint8Array;
  version: number;
  patch?: boolean;
}

/** A change to publish: key and value. */
export type SyncChange = [string, Uint8Array];

/** Keys numbered 0..count-1 whose values live outside the log (the published buckets). */
export interface KeyTable {
  readonly count: number;
  key(id: number): string;
  /** The id of a key of the table, or -1. */
  idOf(key: string): number;
  /** A copy of the key's value. */
  value(id: number): Uint8Array;
  /** The patch from the value a gateway held as of `since` to the current one, or null (send the value). */
  patchSince(id: number, since: number): Uint8Array | null;
  /**
   * Hands `write` what patchSince (when `patches`) or else value would return — possibly a view
   * valid only during the call — and returns whether it was a patch.
   */
  writeValue(
    id: number,
    since: number,
    patches: boolean,
    write: (value: Uint8Array, patch: boolean) => void,
  ): boolean;
  /**
   * Optional, for tables of many keys: the page entries (key, then what writeValue gives) of the
   * first `n` of `ids` in order, stopping before the one that takes them past `budget` bytes
   * unless it is the page's first (`first`). Their bytes are a view valid until the next call.
   */
  writeEntries?(
    ids: Uint32Array,
    n: number,
    since: number,
    patches: boolean,
    budget: number,
    first: boolean,
  ): WrittenEntries;
}

interface Named {
  key: string;
  value: Uint8Array;
  version: number;
}

const EMPTY_TABLE: KeyTable = {
  count: 0,
  key: () => "",
  idOf: () => -1,
  value: () => new Uint8Array(),
  patchSince: () => null,
  writeValue: (_id, _since, _patches, write) => {
    write(new Uint8Array(), false);
    return false;
  },
};

export class SyncLog {
  /** Named keys: id (−1 − index in #named) by key. */
  readonly #namedIds = new Map<string, number>();
  readonly #named: Named[] = [];
  #table: KeyTable = EMPTY_TABLE;
  /** Per table id, the version of its value (0: never published). */
  #tableVersions = new Float64Array(0);
  #tablePublished = 0;
  /** Changes in version order: key id (table id ≥ 0, named key < 0) and version; stale once the key changed again. */
  #orderIds = new Int32Array(1024);
  #orderVersions = new Float64Array(1024);
  #orderLen = 0;
  #stale = 0;
  #version = 0;
  /** writePage's buffer, reused: a page is copied out of it. */
  readonly #page = new PageBuffer();
  readonly #writeValue = (value: Uint8Array, patch: boolean) => this.#page.value(value, patch);
  readonly #waiters = new Set<() => void>();
  /** writePage's run of table entries for the table's writeEntries: their ids and versions. */
  #runIds = new Uint32Array(1024);
  #runVersions = new Float64Array(1024);

  /** Newest version; 0 before the first publication. */
  get version(): number {
    return this.#version;
  }

  /** Keys published so far. */
  get size(): number {
    return this.#named.length + this.#tablePublished;
  }

  /** Serves `table`'s keys from now on (before any of them is committed). */
  attach(table: KeyTable): void {
    this.#table = table;
    this.#tableVersions = new Float64Array(table.count);
    this.#tablePublished = 0;
  }

  get(key: string): Uint8Array | undefined {
    const id = this.#namedIds.get(key);
    if (id !== undefined) return this.#named[-1 - id]?.value;
    const t = this.#table.idOf(key);
    return t >= 0 && (this.#tableVersions[t] ?? 0) > 0 ? this.#table.value(t) : undefined;
  }

  /**
   * Publishes a batch of key → value changes. A value equal to the published one is skipped,
   * so re-publishing an unchanged image costs the gateways nothing. Returns the new version.
   */
  publish(changes: Iterable<SyncChange>): number {
    let changed = false;
    for (const [key, value] of changes) {
      const id = this.#namedIds.get(key);
      const old = id === undefined ? undefined : this.#named[-1 - id];
      if (old !== undefined && equalBytes(old.value, value)) continue;
      const version = ++this.#version;
      if (old === undefined) {
        const named = { key, value, version };
        this.#named.push(named);
        this.#namedIds.set(key, -this.#named.length);
        this.#push(-this.#named.length, version);
      } else {
        this.#stale++;
        old.value = value;
        old.version = version;
        this.#push(id as number, version);
      }
      changed = true;
    }
    this.#afterPublish(changed);
    return this.#version;
  }

  /**
   * Records that the table changed the values of `ids` (in this order), which took the versions
   * after the log's newest (the table numbered them from `version + 1`). Returns the new version.
   */
  commitTable(ids: ArrayLike<number>): number {
    const versions = this.#tableVersions;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i] as number;
      const version = ++this.#version;
      if ((versions[id] as number) > 0) this.#stale++;
      else this.#tablePublished++;
      versions[id] = version;
      this.#push(id, version);
    }
    this.#afterPublish(ids.length > 0);
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
    const table = this.#table;
    for (let i = this.#firstAfter(since); i < this.#orderLen; i++) {
      const id = this.#orderIds[i] as number;
      const version = this.#orderVersions[i] as number;
      let key: string;
      let value: Uint8Array;
      let patch: Uint8Array | null = null;
      if (!this.#isCurrent(id, version)) continue;
      if (id < 0) {
        const named = this.#named[-1 - id] as Named;
        key = named.key;
        value = named.value;
      } else {
        key = table.key(id);
        patch = patches ? table.patchSince(id, since) : null;
        value = patch ?? table.value(id);
      }
      const size = key.length + value.length + 6;
      if (entries.length > 0 && bytes + size > maxBytes) return { entries, more: true };
      bytes += size;
      entries.push(patch === null ? { key, value, version } : { key, value, version, patch: true });
    }
    return { entries, more: false };
  }

  /**
   * The sync page a gateway at `since` gets (sync-codec.ts, docs/wire-format.md §5): the
   * entries changesSince would return, with `flags` (plus `more` when the page stopped early),
   * written straight into one buffer — the same bytes as encodeSyncPage over them (page-buffer.ts:
   * why). The page holds at least one entry and at most `maxBytes` of keys, values and lengths.
   */
  writePage(
    since: number,
    maxBytes: number,
    patches: boolean,
    flags: number,
    epoch: bigint,
  ): { body: Uint8Array; version: number; more: boolean } {
    const out = this.#page;
    out.reset();
    const table = this.#table;
    let count = 0;
    let version = since;
    let anyPatch = false;
    let more = false;
    // Consecutive table keys go to the table's writeEntries together, when it has one: one call
    // for a poll's tens of thousands of buckets instead of several per bucket.
    const writeEntries = table.writeEntries?.bind(table);
    let runLen = 0;
    /** Writes the run collected so far; false when the page filled up before its end. */
    const flushRun = (): boolean => {
      if (runLen === 0 || writeEntries === undefined) return true;
      const n = runLen;
      runLen = 0;
      // The core takes an i32: a page of no limit (MAX_SAFE_INTEGER) is one of 2 GiB.
      const budget = Math.min(maxBytes - (out.at - SYNC_HEADER_BYTES), 0x7fff_ffff);
      const w = writeEntries(this.#runIds, n, since, patches, budget, count === 0);
      if (w.count > 0) {
        out.entries(w.bytes);
        count += w.count;
        version = this.#runVersions[w.count - 1] as number;
        anyPatch ||= w.patched;
      }
      return w.count === n;
    };
    for (let i = this.#firstAfter(since); i < this.#orderLen; i++) {
      const id = this.#orderIds[i] as number;
      const at = this.#orderVersions[i] as number;
      if (!this.#isCurrent(id, at)) continue;
      if (id >= 0 && writeEntries !== undefined) {
        if (runLen === this.#runIds.length) this.#growRun();
        this.#runIds[runLen] = id;
        this.#runVersions[runLen] = at;
        runLen++;
        continue;
      }
      if (!flushRun()) {
        more = true;
        break;
      }
      const start = out.at;
      let patch = false;
      if (id < 0) {
        const named = this.#named[-1 - id] as Named;
        out.key(named.key);
        out.value(named.value, false);
      } else {
        out.key(table.key(id));
        patch = table.writeValue(id, since, patches, this.#writeValue);
      }
      if (count > 0 && out.at - SYNC_HEADER_BYTES > maxBytes) {
        out.at = start;
        more = true;
        break;
      }
      anyPatch ||= patch;
      count++;
      version = at;
    }
    if (!more && !flushRun()) more = true;
    const buf = out.buf;
    const page = { flags: more ? flags | SyncFlags.more : flags, epoch, version };
    writeSyncHeader(new DataView(buf.buffer, buf.byteOffset, SYNC_HEADER_BYTES), page, count, anyPatch);
    return { body: out.copy(), version, more };
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

  #growRun(): void {
    this.#runIds = doubled(this.#runIds);
    this.#runVersions = doubled(this.#runVersions);
  }

  #push(id: number, version: number): void {
    if (this.#orderLen === this.#orderIds.length) {
      this.#orderIds = doubled(this.#orderIds);
      this.#orderVersions = doubled(this.#orderVersions);
    }
    this.#orderIds[this.#orderLen] = id;
    this.#orderVersions[this.#orderLen] = version;
    this.#orderLen++;
  }

  #afterPublish(changed: boolean): void {
    if (this.#stale > 1024 && this.#stale > this.#orderLen / 2) this.#compact();
    if (changed) this.#wake();
  }

  #wake(): void {
    for (const w of [...this.#waiters]) w();
  }

  /** Index of the first change with version > since (the order is sorted by version). */
  #firstAfter(since: number): number {
    let lo = 0;
    let hi = this.#orderLen;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.#orderVersions[mid] as number) <= since) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Is change `version` of key `id` its newest (else it is stale: the key changed again since)? */
  #isCurrent(id: number, version: number): boolean {
    return (id < 0 ? this.#named[-1 - id]?.version : this.#tableVersions[id]) === version;
  }

  /** Drops the stale changes, in place. */
  #compact(): void {
    let n = 0;
    for (let i = 0; i < this.#orderLen; i++) {
      const id = this.#orderIds[i] as number;
      const version = this.#orderVersions[i] as number;
      if (!this.#isCurrent(id, version)) continue;
      this.#orderIds[n] = id;
      this.#orderVersions[n] = version;
      n++;
    }
    this.#orderLen = n;
    this.#stale = 0;
  }
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(b);
}

/** A typed array twice as long as `a`, holding a's elements first (the log's arrays grow so). */
function doubled<T extends Int32Array | Uint32Array | Float64Array>(a: T): T {
  const out = new (a.constructor as new (length: number) => T)(a.length * 2);
  out.set(a);
  return out;
}
