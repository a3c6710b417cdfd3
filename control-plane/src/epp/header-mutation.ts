// What the filter did to the request headers, as an ext_proc HeaderMutation: the filter mutates
// the request's header map in place (set destination and rank headers, remove client routing
// headers, rewrite content-length), so the mutation is the difference between the headers the
// gateway sent and the headers the filter passed on. A header whose values changed is removed
// and written anew: Envoy applies remove_headers before set_headers (ext_proc
// mutation_utils.cc), so every copy the gateway had goes, whether or not its setCopy replaces
// all copies (older Envoy replaced only the first; client-headers.ts says why that matters).
// Every set overwrites (append_action OVERWRITE_IF_EXISTS_OR_ADD, which older Envoy — reading
// only the deprecated `append`, unset = false — also treats as overwrite); a header that now has
// several values is written once with overwrite and then appended. Pseudo-headers are never
// touched: the filter does not change them and Envoy ignores such mutations.
import type { HeaderMutation, HeaderValue, HeaderValueOption } from "./messages.ts";
import { OVERWRITE_IF_EXISTS_OR_ADD } from "./messages.ts";

export type Pairs = Array<[string, string]>;

const APPEND_IF_EXISTS_OR_ADD = 0;

function grouped(pairs: Pairs): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const [k, v] of pairs) {
    if (k.startsWith(":")) continue;
    const key = k.toLowerCase();
    const list = m.get(key);
    if (list === undefined) m.set(key, [v]);
    else list.push(v);
  }
  return m;
}

function sameValues(a: string[] | undefined, b: string[]): boolean {
  return a !== undefined && a.length === b.length && a.every((v, i) => v === b[i]);
}

/**
 * `alsoRemove`: header names (lower case) to remove whatever the difference says — the client's
 * routing headers, removed even where the filter wrote its own value in their place.
 */
export function headerMutation(
  before: Pairs,
  after: Pairs,
  alsoRemove: readonly string[] = [],
): HeaderMutation {
  const was = grouped(before);
  const now = grouped(after);
  const set_headers: HeaderValueOption[] = [];
  const remove = new Set<string>();
  for (const key of alsoRemove) if (was.has(key)) remove.add(key);
  for (const [key, values] of now) {
    const old = was.get(key);
    if (!remove.has(key) && sameValues(old, values)) continue;
    if (old !== undefined) remove.add(key);
    values.forEach((value, i) => {
      set_headers.push({
        header: { key, raw_value: Buffer.from(value, "utf8") },
        append_action: i === 0 ? OVERWRITE_IF_EXISTS_OR_ADD : APPEND_IF_EXISTS_OR_ADD,
      });
    });
  }
  for (const key of was.keys()) if (!now.has(key)) remove.add(key);
  return { set_headers, remove_headers: [...remove] };
}

/** Header pairs from an ext_proc HeaderMap: `raw_value` when present (Envoy ≥ 1.27 sends it), else `value`. */
export function pairsOf(headers: HeaderValue[] | undefined): Pairs {
  return (headers ?? []).map((h) => [
    h.key.toLowerCase(),
    h.raw_value !== undefined && h.raw_value.length > 0
      ? Buffer.from(h.raw_value).toString("utf8")
      : (h.value ?? ""),
  ]);
}
