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

/**
 * The fingerprints live in preallocated rings (sequence, length, the first HEAD_BYTES bytes), so
 * remembering a batch allocates nothing: this runs once per batch on the ingest path, where a
 * Buffer and an object per batch, and shifting an array, were measurable (issue 31).
 */
export class StreamHistory {
  private readonly seqs = new Float64Array(HISTORY_BATCHES);
  private readonly lengths = new Float64Array(HISTORY_BATCHES);
  private readonly heads = new Uint8Array(HISTORY_BATCHES * HEAD_BYTES);
  /** Ring slot of the oldest fingerprint, and how many there are. */
  private start = 0;
  private count = 0;
  private newestSeq = -1;
  private newestPayload: Buffer | null = null;

  add(seq: number, payload: Buffer): void {
    let slot: number;
    if (this.count < HISTORY_BATCHES) {
      slot = (this.start + this.count) % HISTORY_BATCHES;
      this.count++;
    } else {
      slot = this.start;
      this.start = (this.start + 1) % HISTORY_BATCHES;
    }
    this.seqs[slot] = seq;
    this.lengths[slot] = payload.length;
    // A copy of the head, so the ring never keeps a large payload alive (byte by byte: a
    // subarray would be an object per batch).
    const heads = this.heads;
    const at = slot * HEAD_BYTES;
    const n = Math.min(HEAD_BYTES, payload.length);
    for (let i = 0; i < n; i++) heads[at + i] = payload[i] as number;
    this.newestSeq = seq;
    this.newestPayload = payload;
  }

  clear(): void {
    this.start = 0;
    this.count = 0;
    this.newestSeq = -1;
    this.newestPayload = null;
  }

  /** The oldest sequence remembered; null when empty. */
  get oldest(): number | null {
    return this.count === 0 ? null : (this.seqs[this.start] as number);
  }

  /** The newest batch applied, whole (a redelivery of it must be identical). */
  get last(): { seq: number; payload: Buffer } | null {
    return this.newestPayload === null ? null : { seq: this.newestSeq, payload: this.newestPayload };
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
    if (this.newestPayload !== null && this.newestSeq === seq) return this.newestPayload.equals(payload);
    for (let i = this.count - 1; i >= 0; i--) {
      const slot = (this.start + i) % HISTORY_BATCHES;
      if (this.seqs[slot] !== seq) continue;
      if (this.lengths[slot] !== payload.length) return false;
      const n = Math.min(HEAD_BYTES, payload.length);
      const head = this.heads.subarray(slot * HEAD_BYTES, slot * HEAD_BYTES + n);
      return Buffer.compare(head, payload.subarray(0, n)) === 0;
    }
    return null;
  }
}
