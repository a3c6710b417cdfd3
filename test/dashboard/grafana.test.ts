// deploy/grafana/kvroute-dashboard.json stays importable and honest: it parses, its data
// source is a variable, panels do not overlap, and every metric an expression uses is one
// docs/operations.md documents (control-plane metrics and the filter's Envoy stats).
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const root = new URL("../../", import.meta.url);
const dashboard = JSON.parse(
  readFileSync(new URL("deploy/grafana/kvroute-dashboard.json", root), "utf8"),
) as {
  uid: string;
  templating: { list: Array<{ name: string; type: string; query: unknown }> };
  panels: Panel[];
};
const docs = readFileSync(new URL("docs/operations.md", root), "utf8");

interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { uid: string };
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: Array<{ expr: string; datasource?: { uid: string } }>;
  panels?: Panel[];
}

/** Envoy stats: rows written `envoy.name` (`prometheus_name`). */
const filterStats = new Set<string>();

/** Metric names in the first column of docs/operations.md's tables, in Prometheus form. */
function documentedMetrics(): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of docs.split("\n")) {
    const m = /^\| `([a-z_.]+)(?:\{[^}]*\})?`(?: \(`([a-z_]+)`\))? \| (counter|gauge|histogram) \|/.exec(
      line,
    );
    if (m === null) continue;
    const name = (m[2] ?? (m[1] as string)).replaceAll(".", "_");
    out.set(name, m[3] as string);
    if (m[2] !== undefined) filterStats.add(name);
  }
  return out;
}

/** Brackets pair up outside string literals (a cheap guard against a broken PromQL edit). */
function balanced(expr: string): boolean {
  const open: string[] = [];
  const pairs: Record<string, string> = { ")": "(", "]": "[", "}": "{" };
  let quoted = false;
  for (const c of expr) {
    if (c === '"') quoted = !quoted;
    else if (quoted) continue;
    else if ("([{".includes(c)) open.push(c);
    else if (c in pairs && open.pop() !== pairs[c]) return false;
  }
  return open.length === 0 && !quoted;
}

const allPanels = (ps: Panel[]): Panel[] => ps.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);

describe("Grafana dashboard", () => {
  const documented = documentedMetrics();
  const panels = allPanels(dashboard.panels);
  const graphs = panels.filter((p) => p.type !== "row");

  it("reads the documentation's metric tables", () => {
    expect(documented.get("kvroute_slots")).toBe("gauge");
    expect(documented.get("kvroute_requests_prefix_hit")).toBe("counter");
    expect(documented.get("kvroute_decision_us")).toBe("histogram");
    expect(documented.get("kvroute_routed_requests_total")).toBe("counter");
  });

  it("takes its data source from a variable, on every panel and query", () => {
    const ds = dashboard.templating.list.find((v) => v.type === "datasource");
    expect(ds?.query).toBe("prometheus");
    for (const p of graphs) {
      expect(p.datasource?.uid, p.title).toBe(`\${${ds?.name}}`);
      for (const t of p.targets ?? []) expect(t.datasource?.uid, p.title).toBe(`\${${ds?.name}}`);
    }
  });

  it("has the panels operators asked for, with unique ids and no overlaps", () => {
    const titles = graphs.map((p) => p.title.toLowerCase()).join(" | ");
    for (const want of [
      "by outcome",
      "hit ratio",
      "decision latency",
      "slot health",
      "drops, gaps, replays",
      "sync lag",
      "per slot",
    ])
      expect(titles).toContain(want);
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Set<string>();
    for (const p of panels) {
      expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
      for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y++)
        for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x++) {
          const cell = `${x},${y}`;
          expect(cells.has(cell), `${p.title} overlaps at ${cell}`).toBe(false);
          cells.add(cell);
        }
    }
  });

  it("names only documented metrics in its expressions", () => {
    const used = new Set<string>();
    for (const p of graphs) {
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets ?? []) {
        expect(balanced(t.expr), `${p.title}: unbalanced brackets in ${t.expr}`).toBe(true);
        const names = t.expr.match(/\bkvroute_[a-z0-9_]+/g) ?? [];
        expect(names.length, `${p.title}: ${t.expr}`).toBeGreaterThan(0);
        for (const name of names) {
          const base = name.replace(/_(bucket|sum|count)$/, "");
          const ok =
            (documented.has(name) && documented.get(name) !== "histogram") ||
            (base !== name && documented.get(base) === "histogram");
          expect(ok, `${p.title}: ${name} is not a documented metric (or misuses a histogram)`).toBe(true);
          used.add(base);
        }
      }
    }
    // Every stat the filter defines is documented, and appears somewhere on the dashboard.
    const source = readFileSync(new URL("../../filter/assembly/metrics.ts", import.meta.url), "utf8");
    const defined = [...source.matchAll(/defineMetric\([A-Z]+, "([a-z0-9_.]+)"\)/g)].map((m) =>
      (m[1] as string).replaceAll(".", "_"),
    );
    expect(defined.length).toBeGreaterThan(10);
    expect(new Set(filterStats)).toEqual(new Set(defined));
    expect([...filterStats].filter((n) => !used.has(n))).toEqual([]);
  });
});
