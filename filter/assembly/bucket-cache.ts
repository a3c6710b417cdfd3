// The prefix-index buckets this VM has read (`kvr.b.<i>`), kept as read: a bucket is read from
// shared data once and again only after the board says the leader rewrote it (gateway-board.ts),
// so a request whose walk touches buckets this VM already holds reads none. Direct-mapped by
// bucket index, so the memory is bounded (CAPACITY images) and a lookup is one compare.
import { BucketSource } from "../core/prefix-walk";
import { getShared, SharedValue } from "./host";

const CAPACITY: i32 = 8192;
const NONE: i32 = -1;

export class CachedBuckets extends BucketSource {
  private index: StaticArray<i32> = new StaticArray<i32>(CAPACITY);
  private images: StaticArray<ArrayBuffer | null> = new StaticArray<ArrayBuffer | null>(CAPACITY);
  private read: SharedValue = new SharedValue();
  /** Shared-data reads made (the tests' and the bench's count). */
  reads: u32 = 0;

  constructor() {
    super();
    this.index.fill(NONE);
  }

  fetch(i: u32): bool {
    const at = <i32>(i & <u32>(CAPACITY - 1));
    if (this.index[at] !== <i32>i) {
      getShared(`kvr.b.${i}`, this.read);
      this.reads++;
      this.index[at] = <i32>i;
      this.images[at] = this.read.value;
    }
    const v = this.images[at];
    if (v === null) return false;
    this.ptr = changetype<usize>(v);
    this.len = v.byteLength;
    return true;
  }

  /** The leader rewrote bucket i: read it again when next walked. */
  invalidate(i: u32): void {
    const at = <i32>(i & <u32>(CAPACITY - 1));
    if (this.index[at] !== <i32>i) return;
    this.index[at] = NONE;
    this.images[at] = null;
  }

  /** Too much changed to say what: read every bucket again. */
  flush(): void {
    this.index.fill(NONE);
    for (let k = 0; k < CAPACITY; k++) this.images[k] = null;
  }
}
