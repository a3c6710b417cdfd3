// The client routing headers the picker strips. They mirror the filter's own lists
// (filter/assembly/stream.ts: ROUTING_HEADERS, RANK_HEADERS, PREFILL_RANK_HEADERS — AssemblyScript,
// so not importable here; test/epp/client-headers.test.ts fails if they drift apart). The filter
// strips them on every request before it looks at the path; the picker must too, on every answer
// that lets a request go upstream — including the answers it sends before the filter ran (the
// request headers answer in BUFFERED mode, which a gateway that fails open forwards as is).
//
// Why a removal and not only the overwrite of the destination: Envoy applies a HeaderMutation's
// remove_headers before its set_headers (ext_proc mutation_utils.cc), so "remove, then set" is
// exact on every Envoy; an overwrite alone relies on HeaderMapImpl::setCopy replacing every copy,
// which older Envoy did not (it replaced the first copy and kept the rest, the behaviour of
// `http_set_copy_replace_all_headers` off) — a client that repeats the header would keep its
// second copy, and an ORIGINAL_DST cluster reading that header would dial the client's address.
import type { Pairs } from "./header-mutation.ts";
import { DESTINATION_HEADER } from "./lb-metadata.ts";

/**
 * Headers only kvroute may set (filter: ROUTING_HEADERS). The filter strips them first thing and
 * never reads them, so the picker hides them from it too: whatever destination the filter passes
 * on is its own pick.
 */
export const ROUTING_HEADERS: readonly string[] = [
  DESTINATION_HEADER,
  "x-dynamo-worker-instance-id",
  "x-worker-instance-id",
  "x-dynamo-prefill-instance-id",
  "x-prefill-instance-id",
  "x-dynamo-routing-mode",
];

/** Client rank headers (filter: RANK_HEADERS, PREFILL_RANK_HEADERS): read under `honor`, then stripped. */
export const RANK_HEADERS: readonly string[] = [
  "x-data-parallel-rank",
  "x-dynamo-dp-rank",
  "x-dp-rank",
  "x-dynamo-prefill-dp-rank",
  "x-prefill-dp-rank",
];

/** Every client header the filter strips whatever its configuration (lower case). */
export const CLIENT_ROUTING_HEADERS: readonly string[] = [...ROUTING_HEADERS, ...RANK_HEADERS];

const ROUTING = new Set(ROUTING_HEADERS);
const CLIENT = new Set(CLIENT_ROUTING_HEADERS);

/** The request headers without the client's copies of ROUTING_HEADERS (what the filter is shown). */
export function withoutRoutingHeaders(pairs: Pairs): Pairs {
  return pairs.filter(([k]) => !ROUTING.has(k.toLowerCase()));
}

/** The client routing headers `pairs` carries, once each, lower case: what an answer must remove. */
export function clientRoutingHeaders(pairs: Pairs): string[] {
  const out = new Set<string>();
  for (const [k] of pairs) {
    const key = k.toLowerCase();
    if (CLIENT.has(key)) out.add(key);
  }
  return [...out];
}
