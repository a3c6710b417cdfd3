// The live feed of recent routing decisions, newest first, as gateways reported them.
import { h } from "./dom.js";
import { clock, duration, integer, percent, shortSlot } from "./format.js";

/** @param {HTMLElement} root @param {any} status */
export function renderDecisions(root, status) {
  const rows = status.recentDecisions.map((d) =>
    h(
      "tr",
      { data: { requestId: d.requestId, outcome: d.outcomeName } },
      h("td", { class: "num" }, clock(d.atMs)),
      h("td", { class: "id", title: `gateway ${d.gateway}` }, d.requestId || "–"),
      h("td", {}, d.pool ?? "?"),
      h("td", {}, shortSlot(d.slotKey)),
      h("td", { class: "num" }, percent(d.cachedRatio)),
      h(
        "td",
        {
          class: "num",
          data: { field: "served" },
          title: "predicted cached tokens (estimate) → served by the engine",
        },
        `≈${integer(d.predictedCachedTokens)} → ${d.served === null ? "?" : integer(d.served)}`,
      ),
      h("td", {}, h("span", { class: `outcome ${d.outcomeName}` }, d.outcomeName.replace("_", " "))),
      h("td", { class: "num" }, d.ttftMs > 0 ? duration(d.ttftMs) : "–"),
      h(
        "td",
        { class: `num ${d.status === 0 || d.status >= 500 ? "bad" : ""}` },
        d.status === 0 ? "conn fail" : d.status,
      ),
    ),
  );
  if (rows.length === 0) {
    root.replaceChildren(h("p", { class: "muted" }, "No requests reported yet."));
    return;
  }
  root.replaceChildren(
    h(
      "table",
      { class: "feed" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...[
            "time",
            "request id",
            "pool",
            "slot",
            "cached",
            "predicted → served tok",
            "outcome",
            "TTFT",
            "status",
          ].map((t) => h("th", {}, t)),
        ),
      ),
      h("tbody", {}, ...rows),
    ),
  );
}
