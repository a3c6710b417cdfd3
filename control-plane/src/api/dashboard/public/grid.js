// The workers × DP ranks grid: one block per pool, one row per worker (endpoint address), one
// card per rank with its load, KV usage, index size, recent cache hits, predicted vs served cached
// tokens and KV-event stream.
import { h } from "./dom.js";
import { duration, integer, percent, sum } from "./format.js";

/** @param {HTMLElement} root @param {any} status */
export function renderGrid(root, status) {
  const byPool = new Map();
  for (const slot of status.slots) {
    const workers = byPool.get(slot.pool) ?? new Map();
    byPool.set(slot.pool, workers);
    const ranks = workers.get(slot.address) ?? [];
    workers.set(slot.address, ranks);
    ranks.push(slot);
  }
  const blocks = [];
  for (const [pool, workers] of byPool) {
    const width = Math.max(...[...workers.values()].map((r) => r.length));
    const rows = [...workers].map(([address, ranks]) => {
      ranks.sort((a, b) => a.globalRank - b.globalRank);
      return h(
        "div",
        { class: "worker", role: "row", data: { worker: address } },
        h("div", { class: "worker-name", role: "rowheader" }, address),
        ...ranks.map(card),
      );
    });
    blocks.push(
      h(
        "div",
        {
          class: "pool-grid",
          role: "table",
          "aria-label": `pool ${pool}`,
          data: { pool },
          style: { "--ranks": width },
        },
        h("h3", {}, `pool ${pool}`, h("span", { class: "muted" }, ` · ${workers.size} workers`)),
        ...rows,
      ),
    );
  }
  if (blocks.length === 0) blocks.push(h("p", { class: "muted" }, "No slots discovered yet."));
  root.replaceChildren(...blocks);
}

function card(slot) {
  const health = !slot.present ? "gone" : slot.healthy ? "healthy" : "unhealthy";
  const l = slot.load;
  return h(
    "article",
    { class: `slot ${health}`, role: "cell", data: { slot: slot.key, health, rank: slot.globalRank } },
    h(
      "header",
      {},
      h("strong", {}, `rank ${slot.globalRank}`),
      slot.role === "aggregated" ? null : h("span", { class: "role" }, slot.role),
      h("span", { class: `badge ${health}`, data: { field: "health" } }, health),
    ),
    h(
      "div",
      { class: "load" },
      stat("running", l.running),
      stat("waiting", l.waiting),
      stat("in-flight", l.inflight, "inflight"),
    ),
    kvBar(l.kvUsage),
    h(
      "dl",
      { class: "facts" },
      fact("indexed blocks", integer(slot.index?.blocks ?? null), "blocks"),
      fact("TTFT", l.ttftMs > 0 ? duration(l.ttftMs) : "–", "ttft"),
      fact(
        "recent cached",
        slot.recent === null
          ? "–"
          : `${percent(slot.recent.cachedRatio)} of ${integer(slot.recent.requests)}`,
        "cached",
      ),
      fact("predicted / served", servedCache(slot.recent?.served ?? null), "served"),
    ),
    indexTrouble(slot.index),
    events(slot.events),
  );
}

/**
 * Cached tokens the gateways predicted (estimated from bytes) against what the engine said it
 * served, over the requests where it said; then how many requests that was.
 */
function servedCache(served) {
  if (served === null || served.known + served.unknown === 0) return "–";
  const total = served.known + served.unknown;
  if (served.known === 0) return `– (engine said for 0 of ${integer(total)})`;
  return `≈${integer(served.predictedKnownTokens)} / ${integer(served.servedTokens)} tok (${integer(served.known)} of ${integer(total)})`;
}

/** Blocks the index could not use: missed parents (lost events) or ids outside the vocabulary
 * (the pool's tokenizer is probably not the engine's). Shown only when there are any. */
function indexTrouble(index) {
  if (index === null || (index.orphanBlocks === 0 && index.undetokenizableBlocks === 0)) return null;
  return h(
    "p",
    { class: "bad", data: { field: "index-trouble" } },
    `unindexable blocks: ${integer(index.orphanBlocks)} orphaned, ${integer(index.undetokenizableBlocks)} undetokenizable`,
  );
}

function stat(label, value, field = label) {
  return h(
    "div",
    { class: "stat" },
    h("span", { class: "value", data: { field } }, integer(value)),
    h("span", {}, label),
  );
}

function kvBar(usage) {
  const pct = Math.max(0, Math.min(1, usage));
  return h(
    "div",
    { class: "kv", title: "KV-cache usage" },
    h("div", { class: "bar" }, h("div", { class: "fill", style: { width: `${(pct * 100).toFixed(1)}%` } })),
    h("span", { data: { field: "kv" } }, `KV ${percent(pct)}`),
  );
}

function fact(label, value, field) {
  return h("div", {}, h("dt", {}, label), h("dd", { data: { field } }, value));
}

function events(ev) {
  if (ev === null) return h("p", { class: "events muted" }, "no KV-event stream");
  const resets = sum(ev.resets);
  const dropped = sum(ev.dropped);
  const trouble = ev.replays.failed > 0 || resets > 0;
  return h(
    "dl",
    { class: `events facts${trouble ? " trouble" : ""}`, title: ev.endpoint },
    fact("last seq", ev.lastSeq === null ? "–" : integer(ev.lastSeq), "seq"),
    fact("last message", ev.lagMs === null ? "never" : `${duration(ev.lagMs)} ago`, "lag"),
    fact("gaps", integer(ev.gaps), "gaps"),
    fact("replays", `${integer(ev.replays.ok)} ok / ${integer(ev.replays.failed)} failed`, "replays"),
    fact("resets", integer(resets), "resets"),
    fact("dropped", integer(dropped), "dropped"),
  );
}
