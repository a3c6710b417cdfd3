// The slot that served a request, from the upstream address the data plane reports (Envoy's
// `upstream.address` attribute: the host of the attempt that answered, after any retry down the
// GAIE fallback list). The address alone is not trusted: the served slot must be a present slot
// of the chosen slot's pool and role, with the same rank-header value the request carried —
// exactly the slots a fallback list may name. Addresses compare literally (no prefix, no other
// spelling of the same address), as in the subset hint.
import { SlotsImage } from "./cache-images";

/** `chosen` when the address is its own; another eligible slot at that address; else -1. */
export function servedSlot(slots: SlotsImage, chosen: i32, served: string): i32 {
  if (chosen < 0 || chosen >= slots.count) return -1;
  if (served === slots.address[chosen]) return chosen;
  const pool = slots.pool[chosen];
  const role = slots.role(chosen);
  const rank = slots.headerRank[chosen];
  for (let s = 0; s < slots.count; s++) {
    if (s === chosen || !slots.present(s)) continue;
    if (slots.pool[s] !== pool || slots.role(s) !== role || slots.headerRank[s] !== rank) continue;
    if (slots.address[s] === served) return s;
  }
  return -1;
}
