// Gateways polling /v1/sync: which cache version each holds and how far behind it is; and the
// pools with their tokenizer state.
import { h } from "./dom.js";
import { duration, integer } from "./format.js";

/** @param {HTMLElement} root @param {any} status */
export function renderGateways(root, status) {
  if (status.gateways.length === 0) {
    root.replaceChildren(h("p", { class: "muted" }, "No gateway has synced yet."));
    return;
  }
  const rows = status.gateways.map((g) =>
    h(
      "tr",
      { data: { gateway: g.id, behind: g.behind } },
      h("td", { class: "id" }, g.id),
      h("td", {}, g.remoteAddress),
      h("td", { class: "num" }, integer(g.version)),
      h("td", { class: `num ${g.behind > 0 ? "warn" : ""}`, data: { field: "behind" } }, integer(g.behind)),
      h("td", { class: "num" }, `${duration(status.now - g.lastSeenMs)} ago`),
      h("td", { class: "num" }, integer(g.resets)),
    ),
  );
  root.replaceChildren(
    h(
      "table",
      {},
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...["gateway", "address", "version", "behind", "last poll", "resyncs"].map((t) => h("th", {}, t)),
        ),
      ),
      h("tbody", {}, ...rows),
    ),
  );
}

/** @param {HTMLElement} root @param {any} status */
export function renderPools(root, status) {
  root.replaceChildren(
    h(
      "ul",
      { class: "pools" },
      ...status.pools.map((p) =>
        h(
          "li",
          { data: { pool: p.name } },
          h("strong", {}, p.name),
          ` ${p.engine} · ${p.dpMode} DP · ${p.policy} · ${p.models.join(", ")}`,
          p.indexed ? null : h("span", { class: "badge unhealthy" }, "not indexed"),
          p.segmentable ? null : h("span", { class: "badge warn" }, "chats by load"),
          ...p.problems.map((msg) => h("div", { class: "muted" }, msg)),
        ),
      ),
    ),
  );
}
