// docs/operations.md lists every metric the control plane registers, with its type: the
// names are read from the sources of control-plane/src/api/prometheus*.ts.
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const root = new URL("../../", import.meta.url);
const apiDir = new URL("control-plane/src/api/", root);
const docs = readFileSync(new URL("docs/operations.md", root), "utf8");

describe("metrics documentation", () => {
  it("has a row with the right type for every registered control-plane metric", () => {
    const registered: Array<[string, string]> = [];
    for (const file of readdirSync(apiDir).filter((f) => /^prometheus.*\.ts$/.test(f))) {
      const src = readFileSync(new URL(file, apiDir), "utf8");
      for (const m of src.matchAll(/new (Counter|Gauge|Histogram)\(\{\s*name: "(kvroute_[a-z0-9_]+)"/g))
        registered.push([m[2] as string, (m[1] as string).toLowerCase()]);
      // The per-slot gauge helper: perSlot("name", …).
      for (const m of src.matchAll(/perSlot\(\s*"(kvroute_[a-z0-9_]+)"/g))
        registered.push([m[1] as string, "gauge"]);
    }
    expect(registered.length).toBeGreaterThan(25);
    const missing = registered.filter(
      ([name, type]) => !new RegExp(`^\\| \`${name}(\\{[^}]*\\})?\` \\| ${type} \\|`, "m").test(docs),
    );
    expect(missing).toEqual([]);
  });
});
