// Per-rank sequence bookkeeping. Pure: it classifies a sequence number, the caller acts.
//
// The engine numbers batches 0, 1, 2, … per publisher and starts again at 0 when it restarts.
// Live PUB/SUB never redelivers, so on the live path a number below the last one seen means a
// new engine; the same number again is a duplicate. Messages buffered while a replay ran, and
// live copies of replayed batches that arrive after its answer, are different: replay already
// delivered them, so there a lower number is a duplicate as long as it lies in the range the
// replay covered (RankIngest says how long that range holds).

export type SeqAction =
  | { kind: "apply" }
  | { kind: "duplicate" }
  /** Batches [from, seq) are missing. `initial` = nothing seen yet on this rank. */
  | { kind: "gap"; from: number; initial: boolean }
  | { kind: "restart" };

// The actions without fields, one object each: classify runs for every batch.
const APPLY: SeqAction = Object.freeze({ kind: "apply" });
const DUPLICATE: SeqAction = Object.freeze({ kind: "duplicate" });
const RESTART: SeqAction = Object.freeze({ kind: "restart" });

export class SequenceTracker {
  /** Next sequence number expected; null before the first batch. */
  private next: number | null = null;

  get expected(): number | null {
    return this.next;
  }

  get lastSeen(): number | null {
    return this.next === null ? null : this.next - 1;
  }

  /**
   * @param replayFrom while a replay that started at this sequence is recent (its queue, its
   *   late live copies): numbers in [replayFrom, expected) are duplicates rather than a restart.
   */
  classify(seq: number, replayFrom: number | null = null): SeqAction {
    const next = this.next;
    if (next === null) return seq === 0 ? APPLY : { kind: "gap", from: 0, initial: true };
    if (seq === next) return APPLY;
    if (seq > next) return { kind: "gap", from: next, initial: false };
    if (replayFrom !== null && seq >= replayFrom) return DUPLICATE;
    if (replayFrom === null && seq === next - 1) return DUPLICATE;
    return RESTART;
  }

  /** Records that `seq` has been consumed (applied or deliberately skipped). */
  advance(seq: number): void {
    this.next = seq + 1;
  }

  /** After a restart (index already cleared) the new stream is treated like a first one. */
  restart(): void {
    this.next = null;
  }
}
