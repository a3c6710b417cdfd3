// A model's token-bytes table (tokens/token-bytes-table.ts) copied once into the Wasm core, so
// the index detokenizes a whole KV event there (filter/core/token-table.ts) instead of block by
// block in JavaScript. Tables are shared by every slot of the model and kept for the process's
// life (one per configured pool: about 2 MB for a 150k-token vocabulary).
import { core } from "../core/core-wasm.ts";
import type { TokenBytesTable } from "../tokens/token-bytes-table.ts";

const DUMMY_PREFIX = { none: 0, first: 1, always: 2 } as const;
const loaded = new WeakMap<TokenBytesTable, number>();

/** The core's id of the table, copying it in on first use. */
export function coreTokenTable(table: TokenBytesTable): number {
  const known = loaded.get(table);
  if (known !== undefined) return known;
  const c = core();
  const id = c.ex.tokenTableNew(table.size, table.bytes.length, DUMMY_PREFIX[table.dummyPrefix]);
  c.u8.set(table.bytes, c.ex.tokenTableBytesPtr(id));
  c.u32view.set(table.offsets.subarray(0, table.size + 1), c.ex.tokenTableOffsetsPtr(id) >>> 2);
  c.u8.set(table.flags.subarray(0, table.size), c.ex.tokenTableFlagsPtr(id));
  c.ex.tokenTableSeal(id);
  loaded.set(table, id);
  return id;
}
