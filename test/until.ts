// Waiting in tests: on a condition, never on a fixed sleep or a tight deadline. The machine
// running the suites may be loaded (two cores, several suites at once); load makes a wait
// longer, never a failure.

/** Far above anything a healthy run needs; below vitest's 30 s testTimeout so the failure names what it waited for. */
const FAILSAFE_MS = 25_000;

/** Resolves once `check` holds, looking every few milliseconds. */
export async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const giveUp = Date.now() + FAILSAFE_MS;
  while (!(await check())) {
    if (Date.now() > giveUp) throw new Error(`still waiting for ${what} after ${FAILSAFE_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
