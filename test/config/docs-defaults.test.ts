// docs/configuration.md is the configuration reference operators read: every default it names as
// one literal must be the default the schema gives. A default changed in the schema and not in
// the reference (or a documented field the schema does not have) fails here.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { documentedDefaults } from "./documented-defaults.ts";

/** A documented literal as the schema would hold it. */
function literal(text: string): unknown {
  if (text === "true" || text === "false") return text === "true";
  if (text === '""') return "";
  if (text.startsWith("[")) return JSON.parse(text);
  if (/^-?\d+(\.\d+)?$/.test(text)) return Number(text);
  return text;
}

function at(obj: unknown, path: string): unknown {
  let cur: unknown = obj;
  for (const key of path.split(".")) {
    if (cur === null || typeof cur !== "object" || !(key in cur)) return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}

const config = parseConfig(
  {
    pools: [
      { name: "p", models: ["m"] },
      {
        name: "q",
        models: ["n"],
        endpoints: [{ address: "127.0.0.1:8000", kvEvents: { endpoint: "tcp://127.0.0.1:5557" } }],
      },
    ],
    epp: {},
    nats: { servers: ["nats://127.0.0.1:4222"] },
  },
  "docs-defaults",
  {},
);
const sections: [string, unknown][] = [
  ["## Top level", config],
  ["## `pools[]`", config.pools[0]],
  ["### `pools[].endpoints[]`", config.pools[1]?.endpoints[0]],
  ["## `routing`", config.routing],
  ["## `cache` (the gateway's shared-data budget)", config.cache],
  ["## `load`", config.load],
  ["## `sync`", config.sync],
  ["## `http`: what one client may hold of the listener", config.http],
  ["## `epp`: the GAIE endpoint picker", config.epp],
  ["## `nats`: replicas share gateway reports", config.nats],
  ["## `tracing`: what is traced once OpenTelemetry is on", config.tracing],
];

describe("docs/configuration.md defaults", () => {
  for (const [heading, values] of sections) {
    it(`match the schema's: ${heading.replace(/^#+ /, "")}`, () => {
      const rows = [...documentedDefaults(heading)];
      expect(rows.length, `no documented literal defaults under ${heading}`).toBeGreaterThan(0);
      for (const [field, text] of rows)
        expect({ field, value: at(values, field) }).toEqual({ field, value: literal(text) });
    });
  }
});
