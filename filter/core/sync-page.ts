// Reader for the body of GET /v1/sync (docs/wire-format.md §5): validates the whole page before
// anything is applied, so a truncated or foreign answer changes nothing in shared data.
export const SYNC_MAGIC: u32 = 0x5352564b; // "KVRS"
export const SYNC_PROTOCOL: u32 = 1;
export const SYNC_FLAG_RESET: u32 = 1;
export const SYNC_FLAG_MORE: u32 = 2;
const HEADER: i32 = 28;

export class SyncPage {
  flags: u32 = 0;
  epoch: u64 = 0;
  version: u64 = 0;
  count: u32 = 0;
  private base: usize = 0;
  private end: usize = 0;
  /** Cursor of next(): the current entry's key and value. */
  private at: usize = 0;
  keyPtr: usize = 0;
  keyLen: i32 = 0;
  valuePtr: usize = 0;
  valueLen: i32 = 0;

  /** Checks the page at [ptr, ptr+len): true when every entry lies within it and nothing trails. */
  open(ptr: usize, len: i32): bool {
    if (len < HEADER || load<u32>(ptr) !== SYNC_MAGIC || <u32>load<u16>(ptr, 4) !== SYNC_PROTOCOL)
      return false;
    this.flags = <u32>load<u16>(ptr, 6);
    this.epoch = load<u64>(ptr, 8);
    this.version = load<u64>(ptr, 16);
    this.count = load<u32>(ptr, 24);
    this.base = ptr + HEADER;
    this.end = ptr + <usize>len;
    let p = this.base;
    for (let i: u32 = 0; i < this.count; i++) {
      if (p + 2 > this.end) return false;
      const k = <usize>load<u16>(p);
      if (p + 2 + k + 4 > this.end) return false;
      const v = <usize>load<u32>(p + 2 + k);
      if (p + 6 + k + v > this.end) return false;
      p += 6 + k + v;
    }
    if (p !== this.end) return false;
    this.at = this.base;
    return true;
  }

  /** Advances to the next entry (only after open() returned true); false at the end. */
  next(): bool {
    if (this.at >= this.end) return false;
    const p = this.at;
    const k = <i32>load<u16>(p);
    this.keyPtr = p + 2;
    this.keyLen = k;
    this.valueLen = <i32>load<u32>(p + 2 + <usize>k);
    this.valuePtr = p + 6 + <usize>k;
    this.at = this.valuePtr + <usize>this.valueLen;
    return true;
  }
}

/**
 * `kvr.sync` in shared data: the state the gateway's cache is in — epoch u64, version u64 and
 * resyncing u32 (1 between a `reset` page and the first page without `more`). A leader asks the
 * control plane from it and applies an answer only over the very state it asked from.
 */
export const SYNC_RECORD_BYTES: i32 = 20;

export class SyncRecord {
  epoch: u64 = 0;
  version: u64 = 0;
  resyncing: bool = false;

  /** Reads a stored record; absent or short means "nothing applied yet". */
  read(p: usize, len: i32): void {
    const ok = p !== 0 && len >= SYNC_RECORD_BYTES;
    this.epoch = ok ? load<u64>(p) : 0;
    this.version = ok ? load<u64>(p, 8) : 0;
    this.resyncing = ok && load<u32>(p, 16) !== 0;
  }

  write(out: usize): void {
    store<u64>(out, this.epoch);
    store<u64>(out, this.version, 8);
    store<u32>(out, this.resyncing ? 1 : 0, 16);
  }
}
