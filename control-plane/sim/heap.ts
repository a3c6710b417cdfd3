// A binary min-heap ordered by (time, priority, insertion order): the virtual-time event
// queue. Insertion order as the last key makes simultaneous events run in a fixed order,
// which is what makes a simulation repeatable for a seed.

export interface Timed {
  timeMs: number;
  priority: number;
}

interface Entry<T> {
  item: T;
  seq: number;
}

export class EventHeap<T extends Timed> {
  private readonly a: Entry<T>[] = [];
  private seq = 0;

  get size(): number {
    return this.a.length;
  }

  push(item: T): void {
    const a = this.a;
    a.push({ item, seq: this.seq++ });
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(a[i] as Entry<T>, a[p] as Entry<T>)) break;
      [a[i], a[p]] = [a[p] as Entry<T>, a[i] as Entry<T>];
      i = p;
    }
  }

  peek(): T | undefined {
    return this.a[0]?.item;
  }

  pop(): T | undefined {
    const a = this.a;
    if (a.length === 0) return undefined;
    const top = a[0] as Entry<T>;
    const last = a.pop() as Entry<T>;
    if (a.length > 0) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && this.less(a[l] as Entry<T>, a[m] as Entry<T>)) m = l;
        if (r < a.length && this.less(a[r] as Entry<T>, a[m] as Entry<T>)) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m] as Entry<T>, a[i] as Entry<T>];
        i = m;
      }
    }
    return top.item;
  }

  private less(x: Entry<T>, y: Entry<T>): boolean {
    if (x.item.timeMs !== y.item.timeMs) return x.item.timeMs < y.item.timeMs;
    if (x.item.priority !== y.item.priority) return x.item.priority < y.item.priority;
    return x.seq < y.seq;
  }
}
