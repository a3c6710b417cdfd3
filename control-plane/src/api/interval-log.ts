// Logging something that can happen thousands of times a second (aborted uploads, refused
// connections) without a line, let alone a stack trace, per occurrence: the first of a kind is
// logged at once, then at most one line per interval says how many more there were.

import type { Logger } from "pino";

type Level = "warn" | "error";

interface Window {
  level: Level;
  msg: string;
  /** Occurrences since the line that opened this interval. */
  count: number;
  timer: NodeJS.Timeout;
}

export class IntervalLog {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs: number,
  ) {}

  /** One occurrence of `kind`. `fields` (an error, a path) go on the first line only. */
  note(kind: string, level: Level, fields: Record<string, unknown>, msg: string): void {
    const open = this.windows.get(kind);
    if (open !== undefined) {
      open.count++;
      return;
    }
    this.logger[level]({ kind, ...fields }, msg);
    this.open(kind, level, msg);
  }

  /** Logs the counts still held and stops the timers (the server closed). */
  close(): void {
    for (const kind of [...this.windows.keys()]) this.flush(kind, false);
  }

  private open(kind: string, level: Level, msg: string): void {
    // unref: a pending summary never keeps the process alive.
    const timer = setTimeout(() => this.flush(kind, true), this.intervalMs).unref();
    this.windows.set(kind, { level, msg, count: 0, timer });
  }

  /** Ends `kind`'s interval with one line for what it counted. After a busy interval the next
   * one opens at once (a flood stays one line per interval); after a quiet one the next
   * occurrence is logged as a first again. */
  private flush(kind: string, reopen: boolean): void {
    const w = this.windows.get(kind);
    if (w === undefined) return;
    clearTimeout(w.timer);
    this.windows.delete(kind);
    if (w.count === 0) return;
    this.logger[w.level](
      { kind, count: w.count, intervalMs: this.intervalMs },
      `${w.msg} (${w.count} more in ${this.intervalMs / 1000} s)`,
    );
    if (reopen) this.open(kind, w.level, w.msg);
  }
}
