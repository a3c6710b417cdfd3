// The defaults docs/configuration.md names: rows `| \`field\` | \`default\` | … |` whose default is
// one literal (not a placeholder such as `<hostname>-<pid>`, which the code computes at start).
// The reference-against-code tests (control-plane schema, filter plugin) read them here.
import { readFileSync } from "node:fs";

const DOC = readFileSync(new URL("../../docs/configuration.md", import.meta.url), "utf8");

/** Field → documented default text, for the section under `heading` (up to the next heading). */
export function documentedDefaults(heading: string): Map<string, string> {
  const start = DOC.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`no section "${heading}" in docs/configuration.md`);
  const body = DOC.slice(start + heading.length + 2);
  const end = body.search(/\n#{1,6} /);
  const section = end < 0 ? body : body.slice(0, end);
  const rows = new Map<string, string>();
  for (const m of section.matchAll(/^\| `([A-Za-z.]+)` \| `([^`<]*)` \|/gm))
    rows.set(m[1] as string, m[2] as string);
  return rows;
}
