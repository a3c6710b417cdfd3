// The fleet's session → slot table (docs/configuration.md "Session affinity"): learned from every
// gateway's reports (session hashes only — gateways never report ids), forgotten `ttlMs` after a
// session's last request, and published to every gateway as `kvr.sc.<j>` so a session that started
// on one gateway continues on its slot through another. Bounded like the filter's own table: the
// same SESSION_KEYS keys of at most SESSION_WAYS sessions, a full key dropping the session whose
// last request is the oldest (docs/wire-format.md §4.6 has the value layout). A published entry
// carries the expiry its gateway gave it (the gateways' wall clock, capped at this process's now +
// TTL), so a gateway that holds its own record of the session keeps whichever is newer.
import { ByteWriter } from "../common/byte-writer.ts";

export const SESSION_KEYS = 1024;
export const SESSION_WAYS = 8;
/** A kept session's published expiry is refreshed once it lags by ttl / REPUBLISH_FRACTION. */
const REPUBLISH_FRACTION = 8;
interface Entry {
  hash: bigint;
  slot: number;
  /** This process's clock: when the entry is dropped. */
  expiresAt: number;
  /** The reporting gateway's expiry, as published. */
  published: bigint;
}

export class SessionTable {
  readonly #keys = new Map<number, Entry[]>();
  readonly #dirty = new Set<number>();

  constructor(private readonly ttlMs: number) {}

  static keyOf(hash: bigint): number {
    return Number(hash & BigInt(SESSION_KEYS - 1));
  }

  /**
   * Session `hash` went to `slot` at `nowMs`; its gateway forgets it at `gatewayExpiresMs` (its
   * clock). A gateway clock ahead of ours cannot make an entry outlive our TTL at the gateways.
   */
  learn(hash: bigint, slot: number, nowMs: number, gatewayExpiresMs: bigint): void {
    const key = SessionTable.keyOf(hash);
    const old = this.#keys.get(key) ?? [];
    const before = old.find((e) => e.hash === hash && e.expiresAt > nowMs);
    const entries = old.filter((e) => e.hash !== hash && e.expiresAt > nowMs);
    // Entries stay in the order of their last request: the first is the oldest.
    if (entries.length >= SESSION_WAYS) entries.splice(0, entries.length - SESSION_WAYS + 1);
    const expiresAt = nowMs + this.ttlMs;
    const cap = BigInt(Math.floor(expiresAt));
    const reported = gatewayExpiresMs < cap ? gatewayExpiresMs : cap;
    // A session kept on its slot is reported with every request; republishing it each time would
    // resend its key to every gateway at the session's request rate. Its published expiry is only
    // brought forward once it lags by an eighth of the TTL (other gateways may forget the session
    // that much early); a new slot is published at once.
    const fresh =
      before === undefined ||
      before.slot !== slot ||
      reported - before.published >= BigInt(Math.ceil(this.ttlMs / REPUBLISH_FRACTION));
    const published = fresh ? reported : (before as Entry).published;
    entries.push({ hash, slot, expiresAt, published });
    this.#keys.set(key, entries);
    if (fresh || entries.length !== old.length) this.#dirty.add(key);
  }

  /** Drops the sessions whose TTL ended. */
  expire(nowMs: number): void {
    for (const [key, entries] of this.#keys) {
      const live = entries.filter((e) => e.expiresAt > nowMs);
      if (live.length === entries.length) continue;
      if (live.length === 0) this.#keys.delete(key);
      else this.#keys.set(key, live);
      this.#dirty.add(key);
    }
  }

  /** The slot session `hash` last went to, if it is remembered. */
  slotOf(hash: bigint): number | undefined {
    return this.#keys.get(SessionTable.keyOf(hash))?.find((e) => e.hash === hash)?.slot;
  }

  get size(): number {
    let n = 0;
    for (const entries of this.#keys.values()) n += entries.length;
    return n;
  }

  /** The keys that changed since the last call, encoded. */
  takeDirtyImages(): Array<[string, Uint8Array]> {
    const out: Array<[string, Uint8Array]> = [];
    for (const key of this.#dirty) out.push([`kvr.sc.${key}`, this.#encode(key)]);
    this.#dirty.clear();
    return out;
  }

  /** Every key (empty ones too: a gateway resyncing a new epoch drops the previous epoch's sessions). */
  allImages(): Array<[string, Uint8Array]> {
    this.#dirty.clear();
    return Array.from({ length: SESSION_KEYS }, (_, key) => [`kvr.sc.${key}`, this.#encode(key)]);
  }

  #encode(key: number): Uint8Array {
    const entries = this.#keys.get(key) ?? [];
    const w = new ByteWriter().u8(entries.length).u8(0).u16(0);
    for (const e of entries) w.u64(e.hash).u64(e.published).u32(0).u16(e.slot).u16(0);
    return w.finish();
  }
}
