// The publication log: every shared-data key the control plane owns, with the global change
// number ("version") of its latest value. A gateway that has applied everything up to version
// V asks for the keys whose version is > V and gets each such key once, at its newest value —
// coalescing falls out of keeping only the latest version per key. Because every key of the
// bounded key space is published at least once per epoch, "changes since 0" is a full
// snapshot, so snapshots and deltas are the same operation.

export interface SyncEntry {
  key: string;
  value: Uint8Array;
  version: number;
}

interface Current {
  value: Uint8Array;
  version: number;
}

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
  publish(changes: Iterable<[string, Uint8Array]>): number {
    let changed = false;
    for (const [key, value] of changes) {
      const old = this.#current.get(key);
      if (old !== undefined && equalBytes(old.value, value)) continue;
      if (old !== undefined) this.#stale++;
      const version = ++this.#version;
      this.#current.set(key, { value, version });
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
  changesSince(since: number, maxBytes: number): { entries: SyncEntry[]; more: boolean } {
    const entries: SyncEntry[] = [];
    let bytes = 0;
    for (let i = this.#firstAfter(since); i < this.#order.length; i++) {
      const { key, version } = this.#order[i] as { key: string; version: number };
      const cur = this.#current.get(key);
      if (cur === undefined || cur.version !== version) continue;
      const size = key.length + cur.value.length + 6;
      if (entries.length > 0 && bytes + size > maxBytes) return { entries, more: true };
      bytes += size;
      entries.push({ key, value: cur.value, version });
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

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(b);
}
