// Entry point: subscribes to the control plane's status stream (server-sent events; the
// browser reconnects by itself) and re-renders each view from every document.
import { h } from "./dom.js";
import { renderDecisions } from "./feed.js";
import { integer } from "./format.js";
import { renderGateways, renderPools } from "./gateways.js";
import { renderGrid } from "./grid.js";
import { renderHitRate } from "./hit-chart.js";

const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

// Relative to the page, so a path-prefix proxy in front of the control plane still works.
const streamUrl = new URL("v1/events/status", new URL(".", location.href));

function setConnection(state, text) {
  const el = $("connection");
  el.dataset.state = state;
  el.textContent = text;
}

function renderSummary(status) {
  const present = status.slots.filter((s) => s.present);
  const healthy = present.filter((s) => s.healthy).length;
  const rejected = Object.values(status.reports.rejected).reduce((a, b) => a + b, 0);
  const items = [
    ["epoch", status.epoch.slice(-6), "epoch"],
    ["version", integer(status.version), "version"],
    ["slots healthy", `${healthy} / ${present.length}`, "healthy"],
    ["indexed chunks", `${integer(status.index.chunks)}`, "chunks"],
    ["gateways", integer(status.gateways.length), "gateways"],
    [
      "reports",
      `${integer(status.reports.accepted)}${rejected > 0 ? ` (${rejected} refused)` : ""}`,
      "reports",
    ],
  ];
  $("summary").replaceChildren(
    ...items.flatMap(([k, v, field]) => [h("dt", {}, k), h("dd", { data: { field } }, v)]),
  );
}

function render(status) {
  renderSummary(status);
  renderGrid($("grid"), status);
  renderHitRate($("hit-rate"), status);
  renderDecisions($("decisions"), status);
  renderGateways($("gateways"), status);
  renderPools($("pools"), status);
}

const source = new EventSource(streamUrl);
source.addEventListener("open", () => setConnection("live", "live"));
source.addEventListener("error", () => setConnection("lost", "reconnecting…"));
// A hidden tab keeps only the newest document and renders it when shown again.
let pending = null;

function show(data) {
  try {
    render(JSON.parse(data));
    document.body.dataset.updated = String(Date.now());
  } catch (err) {
    // A render bug must not freeze the page silently: show it and keep listening.
    setConnection("error", `render error: ${err instanceof Error ? err.message : err}`);
    console.error(err);
  }
}

source.addEventListener("status", (e) => {
  setConnection("live", "live");
  if (document.hidden) pending = e.data;
  else show(e.data);
});
document.addEventListener("visibilitychange", () => {
  if (!document.hidden && pending !== null) {
    show(pending);
    pending = null;
  }
});
