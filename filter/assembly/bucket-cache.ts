// The prefix-index buckets this VM has read (`kvr.b.<i>`), kept as read: a bucket is read from
// shared data once and again only after the board says the leader rewrote it (gateway-board.ts),
// so a request whose walk touches buckets this VM already holds reads none. Direct-mapped by
// bucket index, so the memory is bounded (CAPACITY images) and a lookup is one compare.
import { BUCKET_KEY_MAX, writeBucketKey } from "../core/bucket-key";
import { BucketSource } from "../core/prefix-walk";
import { freeHostCopy, OK, SharedBytes } from "./host";

const CAPACITY: i32 = 8192;
const NONE: i32 = -1;

export class CachedBuckets extends BucketSource {
  private index: StaticArray<i32> = new StaticArray<i32>(CAPACITY);
  // The images' bytes live outside the GC heap (heap.alloc): a managed array of 8192 references
  // would be visited by every collection, and a large request body brings one after another.
  private ptrs: StaticArray<usize> = new StaticArray<usize>(CAPACITY);
  private lens: StaticArray<i32> = new StaticArray<i32>(CAPACITY);
  private read: SharedBytes = new SharedBytes();
  /** "kvr.b." and then the bucket's decimal index, written in place for each read. */
  private key: ArrayBuffer = new ArrayBuffer(BUCKET_KEY_MAX);

  constructor() {
    super();
    this.index.fill(NONE);
  }

  fetch(i: u32): bool {
    const at = <i32>(i & <u32>(CAPACITY - 1));
    // `at` is masked to the arrays' CAPACITY: unchecked reads are in bounds.
    if (unchecked(this.index[at]) !== <i32>i) {
      const r = this.read;
      r.readKey(changetype<usize>(this.key), writeBucketKey(changetype<usize>(this.key), i));
      this.drop(at);
      this.index[at] = <i32>i;
      if (r.status === OK && r.len > 0) {
        // The host's copy is kept as it is: it is already outside the GC heap.
        this.ptrs[at] = r.ptr;
        this.lens[at] = r.len;
        r.ptr = 0;
        r.len = 0;
      } else {
        r.release();
      }
    }
    const p = unchecked(this.ptrs[at]);
    if (p === 0) return false;
    this.ptr = p;
    this.len = unchecked(this.lens[at]);
    return true;
  }

  /** The leader rewrote bucket i: read it again when next walked. */
  invalidate(i: u32): void {
    const at = <i32>(i & <u32>(CAPACITY - 1));
    if (this.index[at] !== <i32>i) return;
    this.drop(at);
    this.index[at] = NONE;
  }

  /** Too much changed to say what: read every bucket again. */
  flush(): void {
    for (let k = 0; k < CAPACITY; k++) {
      this.drop(k);
      this.index[k] = NONE;
    }
  }

  private drop(at: i32): void {
    const p = this.ptrs[at];
    if (p === 0) return;
    freeHostCopy(p);
    this.ptrs[at] = 0;
    this.lens[at] = 0;
  }
}
