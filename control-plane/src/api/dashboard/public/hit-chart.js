// Pool hit rate over time as a plain SVG line chart (no library: two lines per pool on a
// fixed 0–100 % axis do not need one). Solid: cached bytes / prompt bytes per time bucket;
// dashed: share of requests routed on a prefix or speculative hit. A bucket without traffic
// breaks the line rather than drawing a slope through silence.
import { h, s } from "./dom.js";
import { clock, percent } from "./format.js";

const W = 800;
const H = 180;
const PAD = { left: 40, right: 10, top: 10, bottom: 22 };
const COLORS = ["#2f7ed8", "#d8772f", "#3aa655", "#9b59b6", "#c0392b", "#16a085"];

/** @param {HTMLElement} root @param {any} status */
export function renderHitRate(root, status) {
  const { bucketMs, windowMs, pools } = status.hitRate;
  const names = Object.keys(pools).sort();
  if (names.length === 0) {
    root.replaceChildren(h("p", { class: "muted" }, "No reported requests in the last window."));
    return;
  }
  const end = status.now;
  const start = end - windowMs;
  // A bucket is drawn at its middle, which for the current bucket can lie a little after now.
  const x = (t) =>
    PAD.left + Math.min(1, Math.max(0, (t + bucketMs / 2 - start) / windowMs)) * (W - PAD.left - PAD.right);
  const y = (ratio) => PAD.top + (1 - ratio) * (H - PAD.top - PAD.bottom);

  const axes = [0, 0.25, 0.5, 0.75, 1].map((r) =>
    s(
      "g",
      { class: "axis" },
      s("line", { x1: PAD.left, x2: W - PAD.right, y1: y(r), y2: y(r) }),
      s("text", { x: PAD.left - 4, y: y(r) + 4, "text-anchor": "end" }, percent(r)),
    ),
  );
  const ticks = [start, start + windowMs / 2, end].map((t, i) =>
    s(
      "text",
      { class: "axis", x: x(t - bucketMs / 2), y: H - 6, "text-anchor": ["start", "middle", "end"][i] },
      clock(t),
    ),
  );
  const series = names.map((pool, i) => {
    const color = COLORS[i % COLORS.length];
    const points = pools[pool];
    const bytes = points.map((p) => [p.t, p.promptBytes > 0 ? p.cachedBytes / p.promptBytes : 0]);
    const hits = points.map((p) => [p.t, p.requests > 0 ? p.hits / p.requests : 0]);
    return s(
      "g",
      { class: "series", data: { pool, points: points.length } },
      s("path", { d: path(bytes, bucketMs, x, y), stroke: color, fill: "none", "stroke-width": 2 }),
      s("path", { d: path(hits, bucketMs, x, y), stroke: color, fill: "none", "stroke-dasharray": "4 3" }),
      ...points.map((p, j) =>
        s(
          "circle",
          { cx: x(p.t), cy: y(bytes[j][1]), r: 2.5, fill: color },
          s(
            "title",
            {},
            `${pool} ${clock(p.t)}: ${percent(bytes[j][1])} of bytes cached, ${p.hits}/${p.requests} hits`,
          ),
        ),
      ),
    );
  });
  const legend = h(
    "ul",
    { class: "legend" },
    ...names.map((pool, i) => {
      const last = pools[pool][pools[pool].length - 1];
      const ratio = last.promptBytes > 0 ? last.cachedBytes / last.promptBytes : 0;
      return h(
        "li",
        { data: { pool } },
        h("span", { class: "swatch", style: { background: COLORS[i % COLORS.length] } }),
        `${pool}: `,
        h("strong", { data: { field: "latest" } }, percent(ratio)),
        ` cached bytes, ${last.hits}/${last.requests} hits in the ${bucketMs / 1000} s from ${clock(last.t)}`,
      );
    }),
    h("li", { class: "muted" }, "solid: cached bytes · dashed: requests with a hit"),
  );
  root.replaceChildren(
    s(
      "svg",
      { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": "pool hit rate" },
      ...axes,
      ...ticks,
      ...series,
    ),
    legend,
  );
}

/** An SVG path through [t, ratio] points, lifting the pen across buckets without traffic. */
function path(points, bucketMs, x, y) {
  let d = "";
  let prev = null;
  for (const [t, r] of points) {
    d += `${prev !== null && t - prev <= bucketMs ? "L" : "M"}${x(t).toFixed(1)},${y(r).toFixed(1)}`;
    prev = t;
  }
  return d;
}
