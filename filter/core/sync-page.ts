// Reader for the body of GET /v1/sync (docs/wire-format.md §5): validates the whole page before
// anything is applied, so a truncated or foreign answer changes nothing in shared data.
export const SYNC_MAGIC: u32 = 0x5352564b; // "KVRS"
export const SYNC_PROTOCOL: u32 = 1;
/** Entries may patch a key's value (the top bit of the value length), bucket images being in
 * segment rows; the filter asks for it (protocol 2 was the same for bitmap rows). */
export const SYNC_PATCH_PROTOCOL: u32 = 3;
export const PATCH_BIT: u32 = 0x80000000;
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
  /** The current entry is a patch of the key's value (filter/core/bucket-patch.ts), not a value. */
  patch: bool = false;
  private protocol: u32 = 0;

  /** Checks the page at [ptr, ptr+len): true when every entry lies within it and nothing trails. */
  open(ptr: usize, len: i32): bool {
    if (len < HEADER || load<u32>(ptr) !== SYNC_MAGIC) return false;
    const protocol = <u32>load<u16>(ptr, 4);
    if (protocol !== SYNC_PROTOCOL && protocol !== SYNC_PATCH_PROTOCOL) return false;
    this.protocol = protocol;
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
      const v = <usize>this.lengthOf(load<u32>(p + 2 + k));
      if (p + 6 + k + v > this.end) return false;
      p += 6 + k + v;
    }
    if (p !== this.end) return false;
    this.at = this.base;
    return true;
  }

  /** An entry's value length from its length word (a patch's flag bit cleared). */
  @inline private lengthOf(word: u32): u32 {
    return this.protocol === SYNC_PATCH_PROTOCOL ? word & ~PATCH_BIT : word;
  }

  /** Advances to the next entry (only after open() returned true); false at the end. */
  next(): bool {
    if (this.at >= this.end) return false;
    const p = this.at;
    const k = <i32>load<u16>(p);
    this.keyPtr = p + 2;
    this.keyLen = k;
    const word = load<u32>(p + 2 + <usize>k);
    this.patch = this.protocol === SYNC_PATCH_PROTOCOL && (word & PATCH_BIT) !== 0;
    this.valueLen = <i32>this.lengthOf(word);
    this.valuePtr = p + 6 + <usize>k;
    this.at = this.valuePtr + <usize>this.valueLen;
    return true;
  }
}

/**
 * `kvr.sync` in shared data: the state the gateway's cache is in — epoch u64, version u64 and
 * flags u32 (bit 0 resyncing: between a `reset` page and the first page without `more`; bit 1
 * partial: the last page had `more`, so keys not served yet are older than the version). A
 * leader asks the control plane from it and applies an answer only over the very state it asked
 * from; it asks for patches only from a state that is not partial (a patch starts from the
 * key's value as of the version).
 */
export const SYNC_RECORD_BYTES: i32 = 20;

export class SyncRecord {
  epoch: u64 = 0;
  version: u64 = 0;
  resyncing: bool = false;
  partial: bool = false;

  /** Reads a stored record; absent or short means "nothing applied yet". */
  read(p: usize, len: i32): void {
    const ok = p !== 0 && len >= SYNC_RECORD_BYTES;
    this.epoch = ok ? load<u64>(p) : 0;
    this.version = ok ? load<u64>(p, 8) : 0;
    const flags = ok ? load<u32>(p, 16) : 0;
    this.resyncing = (flags & 1) !== 0;
    this.partial = (flags & 2) !== 0;
  }

  write(out: usize): void {
    store<u64>(out, this.epoch);
    store<u64>(out, this.version, 8);
    store<u32>(out, (this.resyncing ? 1 : 0) | (this.partial ? 2 : 0), 16);
  }
}
