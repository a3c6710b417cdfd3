// A bounded set with least-recently-used eviction (Map keeps insertion order; a hit re-inserts).
export class LruSet<K> {
  readonly #map = new Map<K, true>();

  constructor(readonly capacity: number) {}

  has(key: K): boolean {
    return this.#map.has(key);
  }

  /** Adds or refreshes `key`, evicting the least recently used entry when full. */
  touch(key: K): void {
    if (this.#map.delete(key)) {
      this.#map.set(key, true);
      return;
    }
    if (this.#map.size >= this.capacity) {
      const oldest = this.#map.keys().next();
      if (!oldest.done) this.#map.delete(oldest.value);
    }
    this.#map.set(key, true);
  }

  get size(): number {
    return this.#map.size;
  }
}
