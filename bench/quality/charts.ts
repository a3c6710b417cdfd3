// PNG charts of the results: Vega-Lite specs compiled to Vega, rendered to SVG headless
// (renderer "none"), rasterised by resvg (prebuilt in its npm package; no browser, no canvas).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Resvg } from "@resvg/resvg-js";
import * as vega from "vega";
import * as vl from "vega-lite";
import type { ResultRow } from "./report.ts";

interface Point {
  workload: string;
  qps: number;
  policy: string;
  value: number;
}

/** Renders a Vega-Lite spec to a PNG file (shared with the other benches). */
export async function renderPng(spec: vl.TopLevelSpec, path: string): Promise<void> {
  const view = new vega.View(vega.parse(vl.compile(spec).spec), { renderer: "none" });
  const svg = await view.toSVG(2);
  view.finalize();
  const png = new Resvg(svg, { font: { loadSystemFonts: true }, background: "white" }).render().asPng();
  writeFileSync(path, png);
}

// kvroute drawn in black and thick, the ideal bound dashed grey; baselines in distinct hues.
const PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d", "#eeca3b"];

function colors(policies: string[]): { domain: string[]; range: string[] } {
  let next = 0;
  const range = policies.map((p) =>
    p === "kvroute"
      ? "#000000"
      : p === "ideal-bound"
        ? "#9a9a9a"
        : (PALETTE[next++ % PALETTE.length] as string),
  );
  return { domain: policies, range };
}

function lineSpec(points: Point[], title: string, yTitle: string, logY: boolean): vl.TopLevelSpec {
  const scale = colors([...new Set(points.map((p) => p.policy))]);
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v5.json",
    title,
    data: { values: points },
    facet: { column: { field: "workload", type: "nominal", title: null } },
    resolve: { scale: { y: "independent", x: "independent" } },
    spec: {
      width: 220,
      height: 180,
      mark: { type: "line", point: true },
      encoding: {
        x: { field: "qps", type: "quantitative", title: "offered QPS" },
        y: { field: "value", type: "quantitative", title: yTitle, scale: logY ? { type: "log" } : {} },
        color: { field: "policy", type: "nominal", title: "policy", scale, sort: scale.domain },
        strokeDash: { condition: { test: "datum.policy === 'ideal-bound'", value: [4, 3] }, value: [1, 0] },
        strokeWidth: { condition: { test: "datum.policy === 'kvroute'", value: 3.5 }, value: 1.5 },
      },
    },
  };
}

/** Writes the charts into `dir` as `<prefix>-ttft-p90.png` etc.; returns their file names. */
export async function writeCharts(
  rows: readonly ResultRow[],
  dir: string,
  prefix = "quality",
): Promise<string[]> {
  const of = (pick: (r: ResultRow) => number): Point[] =>
    rows.map((r) => ({ workload: r.workload, qps: r.qps, policy: r.policy, value: pick(r) }));
  const charts: Array<[string, vl.TopLevelSpec]> = [
    [
      `${prefix}-ttft-p90.png`,
      lineSpec(
        of((r) => Math.max(1, r.metrics.ttftP90)),
        "TTFT p90 vs offered load",
        "TTFT p90 (ms, log)",
        true,
      ),
    ],
    [
      `${prefix}-hit-rate.png`,
      lineSpec(
        of((r) => r.metrics.hitRate * 100),
        "Prefix-cache hit rate",
        "hit rate (%)",
        false,
      ),
    ],
    [
      `${prefix}-throughput.png`,
      lineSpec(
        of((r) => r.metrics.outputTokPerS),
        "Output throughput",
        "output tokens/s",
        false,
      ),
    ],
  ];
  for (const [file, spec] of charts) await renderPng(spec, join(dir, file));
  return charts.map(([file]) => file);
}
