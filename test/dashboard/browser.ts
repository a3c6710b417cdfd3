// Debian's chromium driven by playwright-core, with a fresh profile per launch. CI installs
// chromium (.ci/run), so there a missing browser is a failure; only on a developer machine
// without it (CI unset) do the browser tests skip, saying why.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Why the browser tests cannot run here, or null when they can (or must, in CI). */
export function browserSkipReason(): string | null {
  if (existsSync(CHROMIUM) || process.env.CI) return null;
  return `${CHROMIUM} is missing and CI is unset: skipping the dashboard browser tests (apt-get install -y chromium)`;
}

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: .ci/run installs it (apt-get install -y chromium)`);
  // Playwright refuses --user-data-dir in args; a persistent context on a fresh directory is
  // the same thing.
  const profile = mkdtempSync(join(tmpdir(), "kvroute-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 1400, height: 1000 },
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
