// How this one-call-at-a-time host lets Envoy's parallel workers interleave: a thread may be
// preempted right after a shared-data read, running a queued task of another thread first (the
// window between a read and a CAS write). It needs only what any thread offers, so it does not
// import the VM (thread.ts), and the core that owns it does not either.

/** What the scheduler needs of a worker thread (thread.ts WasmThread has it). */
export interface SchedulableThread {
  /** True while the thread is inside a call into its VM. */
  readonly onStack: boolean;
  readonly tasks: ReadonlyArray<unknown>;
  /** Runs the oldest queued task now; false when there was none. */
  runOneTask(): boolean;
}

export class Scheduler {
  private readonly onStack = new Set<SchedulableThread>();
  threads: SchedulableThread[] = [];
  preemptions = 0;

  constructor(private readonly probability: number) {}

  // Who is on the stack matters only to preemption: with it off (the default), nothing is kept.
  enter(t: SchedulableThread): void {
    if (this.probability > 0) this.onStack.add(t);
  }

  leave(t: SchedulableThread): void {
    if (this.probability > 0 && !t.onStack) this.onStack.delete(t);
  }

  /** Runs one queued task of another thread that is not inside a VM call right now. */
  maybePreempt(current: SchedulableThread): void {
    if (this.probability <= 0 || Math.random() >= this.probability) return;
    const others = this.threads.filter((t) => t !== current && !this.onStack.has(t) && t.tasks.length > 0);
    const pick = others[Math.floor(Math.random() * others.length)];
    if (pick?.runOneTask()) this.preemptions++;
  }
}
