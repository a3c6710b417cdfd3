// Live messages held while a rank's stream is being settled against the engine's replay
// buffer: FIFO, bounded by the caller, with O(1) removal from the front (a drain can run
// through 100 000 of them).

export class PendingQueue<T> {
  private items: T[] = [];
  private head = 0;

  get size(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  /** Puts `item` back in front (the message that started a replay goes first). */
  unshift(item: T): void {
    if (this.head > 0) this.items[--this.head] = item;
    else this.items.unshift(item);
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head] as T;
    this.head++;
    if (this.head === this.items.length) this.clear();
    else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  /** Removes every item `drop` picks, keeping order; returns them. */
  remove(drop: (item: T) => boolean): T[] {
    const kept: T[] = [];
    const removed: T[] = [];
    for (let i = this.head; i < this.items.length; i++) {
      const item = this.items[i] as T;
      (drop(item) ? removed : kept).push(item);
    }
    this.items = kept;
    this.head = 0;
    return removed;
  }

  clear(): void {
    this.items = [];
    this.head = 0;
  }
}
