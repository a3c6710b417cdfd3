// The last batches a rank applied, kept small, so the engine's replay of the same sequence
// numbers can be recognised as the same batches (the same engine) or not (an engine that
// restarted and has since published under those numbers). See RankIngest's verification.
//
// A batch is recognised by its length and first bytes: msgspec writes the batch timestamp (a
// float64 of wall-clock seconds, `time.time()`) among the first 13 bytes in both the positional
// `[ts, events, rank]` and the map `{ts, events, …}` layout, so two engine processes cannot
// produce the same fingerprint under one sequence number unless they published it within the
// same clock tick. The newest batch is kept whole and compared byte for byte.

/** Batches remembered. A verification after a reconnect compares the engine's replay with all
 * of them, so a few of the new engine's batches read before the disconnect was noticed still
 * leave older ones of the dead engine to compare. */
export const HISTORY_BATCHES = 32;
const HEAD_BYTES = 32;

/** What the engine's replay says about the stream we have been applying. */
export type Verdict =
  /** It holds batches under our numbers, all unchanged: the same engine. */
  | "same"
  /** Different content under one of our numbers, or nothing as new as our last batch. */
  | "restart"
  /** Everything it holds is newer than what we remember: too much was missed to tell. */
  | "unknown";

interface Fingerprint {
  seq: number;
  length: number;
  head: Buffer;
}

export class StreamHistory {
  private ring: Fingerprint[] = [];
  private newest: { seq: number; payload: Buffer } | null = null;

  add(seq: number, payload: Buffer): void {
    // A copy of the head, so the ring never keeps a large payload alive.
    this.ring.push({ seq, length: payload.length, head: Buffer.from(payload.subarray(0, HEAD_BYTES)) });
    if (this.ring.length > HISTORY_BATCHES) this.ring.shift();
    this.newest = { seq, payload };
  }

  clear(): void {
    this.ring = [];
    this.newest = null;
  }

  /** The oldest sequence remembered; null when empty. */
  get oldest(): number | null {
    return this.ring[0]?.seq ?? null;
  }

  /** The newest batch applied, whole (a redelivery of it must be identical). */
  get last(): { seq: number; payload: Buffer } | null {
    return this.newest;
  }

  /**
   * Is the engine answering a replay the one whose batches we applied, up to `lastSeq`? Compared
   * over every sequence number both sides have: any difference means another engine. An engine
   * that went on always holds a batch at least as new as our last one (its newest), so an
   * answer that stops short of it (nothing at all, for an engine that has not published yet)
   * is a restart too.
   */
  verdict(replayed: readonly { seq: number; payload: Buffer }[], lastSeq: number): Verdict {
    let overlap = false;
    let newest = -1;
    for (const b of replayed) {
      newest = Math.max(newest, b.seq);
      const same = this.matches(b.seq, b.payload);
      if (same === null) continue;
      if (!same) return "restart";
      overlap = true;
    }
    if (newest < lastSeq) return "restart";
    return overlap ? "same" : "unknown";
  }

  /** true / false when `seq` is remembered and `payload` is / is not that batch; null otherwise. */
  matches(seq: number, payload: Buffer): boolean | null {
    if (this.newest?.seq === seq) return this.newest.payload.equals(payload);
    for (let i = this.ring.length - 1; i >= 0; i--) {
      const f = this.ring[i] as Fingerprint;
      if (f.seq !== seq) continue;
      return f.length === payload.length && f.head.equals(payload.subarray(0, HEAD_BYTES));
    }
    return null;
  }
}
