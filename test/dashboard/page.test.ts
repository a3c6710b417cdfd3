// The dashboard in a real browser (Debian chromium via playwright-core) against a control
// plane fed by two simulated workers: every slot is on the grid, numbers move as traffic and
// reports arrive, and a worker whose /metrics stops answering turns unhealthy on screen.
// Screenshots go to test-results/dashboard/.
import { mkdirSync } from "node:fs";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeReport } from "../../control-plane/src/reports/report-codec.ts";
import { type Browser, browserSkipReason, launchBrowser } from "./browser.ts";
import { chat, type Fleet, startFleet } from "./fleet.ts";

const SHOTS = "test-results/dashboard";
const skipReason = browserSkipReason();
if (skipReason !== null) console.warn(skipReason);

describe.skipIf(skipReason !== null)("dashboard in chromium", () => {
  let fleet: Fleet;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    [fleet, browser] = await Promise.all([startFleet(), launchBrowser()]);
    page = await browser.context.newPage();
    page.on("pageerror", (err) => pageErrors.push(err.message));
    page.on("console", (msg) => {
      if (msg.type() === "error") pageErrors.push(msg.text());
    });
  });

  afterAll(async () => {
    await browser?.close();
    await fleet?.stop();
  });

  const text = async (selector: string) =>
    ((await page.locator(selector).first().textContent()) ?? "").trim();
  const poll = { timeout: 10_000, interval: 100 };

  it("shows every slot, follows traffic and reports, and marks a downed worker unhealthy", async () => {
    const { cp, sims } = fleet;
    const slots = cp.slots.present();
    const addressOf = (i: number) => `127.0.0.1:${sims[i]?.ports[0]}`;
    const slotOf = (worker: number, rank: number) => {
      const s = slots.find((x) => x.address === addressOf(worker) && x.globalRank === rank);
      if (s === undefined) throw new Error(`no slot for worker ${worker} rank ${rank}`);
      return s;
    };
    const target = slotOf(0, 1);
    const cell = `[data-slot="${target.key}"]`;

    await page.goto(`${cp.url}/dashboard`);
    // The grid: every slot, as 2 worker rows of 2 ranks, all healthy, and the stream live.
    await expect
      .poll(
        () => page.locator("[data-slot]").evaluateAll((els) => els.map((e) => e.getAttribute("data-slot"))),
        poll,
      )
      .toHaveLength(4);
    const shown = await page
      .locator("[data-slot]")
      .evaluateAll((els) => els.map((e) => e.getAttribute("data-slot")));
    expect(shown.sort()).toEqual(slots.map((s) => s.key).sort());
    expect(await page.locator("[data-worker]").count()).toBe(2);
    await expect.poll(() => page.locator('[data-slot][data-health="healthy"]').count(), poll).toBe(4);
    expect(await text("#connection")).toBe("live");
    expect(await text(`${cell} [data-field="blocks"]`)).toBe("0");
    expect(await text(`${cell} [data-field="seq"]`)).toBe("–");

    // Traffic: chats pinned to worker 0 rank 1 and worker 1 rank 0 store blocks there, and
    // the engines' KV events reach the index.
    const prompt = "Route me to the rank that already holds my prefix, please. ".repeat(30);
    await chat(sims[0] as (typeof sims)[number], 1, prompt);
    await chat(sims[1] as (typeof sims)[number], 0, `${prompt} (second worker)`);
    // A gateway: syncs (appears under Gateways) and reports decisions and in-flight requests.
    await fetch(`${cp.url}/v1/sync?epoch=0&version=0`, { headers: { "x-kvroute-gateway": "gw-dash" } });
    const report = encodeReport({
      gateway: "gw-dash",
      inflight: new Map([[target.id, 3]]),
      finished: [
        {
          slot: target.id,
          status: 200,
          outcome: 1,
          promptBytes: 4000,
          cachedBytes: 3000,
          servedCachedTokens: 700,
          ttftMs: 42,
          durationMs: 300,
          requestId: "dash-req-hit",
        },
        {
          slot: slotOf(1, 0).id,
          status: 200,
          outcome: 0,
          promptBytes: 2000,
          cachedBytes: 0,
          ttftMs: 80,
          durationMs: 500,
          requestId: "dash-req-load",
        },
        {
          slot: slotOf(1, 1).id,
          status: 0,
          outcome: 5,
          promptBytes: 1000,
          cachedBytes: 500,
          ttftMs: 0,
          durationMs: 10,
          requestId: "dash-req-spec",
        },
      ],
      speculative: [],
    });
    const posted = await fetch(`${cp.url}/v1/report`, { method: "POST", body: Buffer.from(report) });
    expect(posted.status).toBe(204);

    // A long generation on the same rank: its running count goes up on screen, then back down.
    const long = chat(sims[0] as (typeof sims)[number], 1, `${prompt} Tell me a long story.`, 250);
    await expect.poll(() => text(`${cell} [data-field="running"]`), poll).toBe("1");
    await long;
    await expect.poll(() => text(`${cell} [data-field="running"]`), poll).toBe("0");

    await expect
      .poll(async () => Number((await text(`${cell} [data-field="blocks"]`)).replaceAll(",", "")), poll)
      .toBeGreaterThan(0);
    await expect.poll(() => text(`${cell} [data-field="seq"]`), poll).not.toBe("–");
    await expect.poll(() => text(`${cell} [data-field="inflight"]`), poll).toBe("3");
    await expect.poll(() => text(`${cell} [data-field="ttft"]`), poll).toBe("42 ms");
    await expect.poll(() => text(`${cell} [data-field="cached"]`), poll).toBe("75% of 1");
    // Predicted (3000 bytes ≈ 750 tokens) against what the engine said it served, per slot.
    expect(await text(`${cell} [data-field="served"]`)).toBe("≈750 / 700 tok (1 of 1)");
    expect(await text(`[data-slot="${slotOf(1, 0).key}"] [data-field="served"]`)).toBe(
      "– (engine said for 0 of 1)",
    );
    expect(await text(`[data-slot="${slotOf(0, 0).key}"] [data-field="served"]`)).toBe("–");
    // The decisions feed, newest report first, with outcome names and cached ratios.
    const feed = await page
      .locator("#decisions tbody tr")
      .evaluateAll((rows) =>
        rows.map((r) => [r.getAttribute("data-request-id"), r.getAttribute("data-outcome")]),
      );
    expect(feed).toEqual(
      expect.arrayContaining([
        ["dash-req-hit", "prefix_hit"],
        ["dash-req-load", "load_only"],
        ["dash-req-spec", "speculative_hit"],
      ]),
    );
    expect(await text('#decisions tr[data-request-id="dash-req-hit"]')).toContain("75%");
    expect(await text('#decisions tr[data-request-id="dash-req-hit"] [data-field="served"]')).toBe(
      "≈750 → 700",
    );
    expect(await text('#decisions tr[data-request-id="dash-req-load"] [data-field="served"]')).toBe("≈0 → ?");
    expect(await text('#decisions tr[data-request-id="dash-req-spec"]')).toContain("conn fail");
    await expect.poll(() => page.locator('#gateways tr[data-gateway="gw-dash"]').count(), poll).toBe(1);
    // The pool's hit rate: one bucket so far, 3500 of 7000 bytes cached, 2 of 3 requests hits.
    await expect.poll(() => text('#hit-rate li[data-pool="qwen"] [data-field="latest"]'), poll).toBe("50%");
    expect(await text('#hit-rate li[data-pool="qwen"]')).toContain("2/3 hits");
    expect(await page.locator('#hit-rate svg g.series[data-pool="qwen"] circle').count()).toBeGreaterThan(0);
    expect(await text('#summary [data-field="reports"]')).toBe("1");
    await page.screenshot({ path: `${SHOTS}/live.png`, fullPage: true });

    // Take worker 1 down: its HTTP front closes, scrapes fail, and after `unhealthyAfter`
    // failures both its ranks turn red while worker 0 stays green.
    await sims[1]?.fronts[0]?.close();
    const down = [slotOf(1, 0).key, slotOf(1, 1).key];
    for (const key of down)
      await expect
        .poll(() => page.locator(`[data-slot="${key}"]`).getAttribute("data-health"), poll)
        .toBe("unhealthy");
    expect(await page.locator('[data-slot][data-health="healthy"]').count()).toBe(2);
    expect(await text(`[data-slot="${down[0]}"] [data-field="health"]`)).toBe("unhealthy");
    expect(await text('#summary [data-field="healthy"]')).toBe("2 / 4");
    await page.screenshot({ path: `${SHOTS}/worker-down.png`, fullPage: true });

    expect(pageErrors).toEqual([]);
  });
});
