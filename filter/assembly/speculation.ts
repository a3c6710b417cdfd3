// This gateway's speculative routes (DESIGN §3): right after routing a prompt the VM remembers
// "chunk h at depth d → slot s until t" for its checkpoint depths, in its own table and as route
// records on the board, which brings them to the gateway's other VMs with their next read. Lookups
// read no shared data. Best effort: a VM that misses records (more than the board's ring between
// two of its reads) learns the route from the control plane (the report carries it too).
import { ByteBuf } from "../core/byte-buf";
import { addRoute, ROUTE_SPECULATIVE } from "../core/gateway-board";
import { RouteCells } from "../core/route-cells";
import { checkpoints } from "../core/speculative";

export class Speculation {
  /** Slot of the last find(), -1 when none. */
  slot: i32 = -1;
  private depths: ByteBuf = new ByteBuf(256);

  constructor(
    private cells: RouteCells,
    private records: ByteBuf,
  ) {}

  private probe(hashes: usize, depth: i32, nowMs: u64): i32 {
    return this.cells.lookup(load<u64>(hashes + ((<usize>(depth - 1)) << 3)), <u32>depth, nowMs);
  }

  /**
   * The deepest recorded checkpoint of this prompt (0 when none) and its slot in `slot`. Every
   * routed prompt records chunk 1, so a miss there ends the search.
   */
  find(hashes: usize, count: i32, nowMs: u64): i32 {
    this.slot = -1;
    if (count <= 0) return 0;
    const first = this.probe(hashes, 1, nowMs);
    if (first < 0) return 0;
    const n = checkpoints(count, this.depths);
    for (let i = 0; i < n; i++) {
      const d = load<i32>(this.depths.ptr + ((<usize>i) << 2));
      if (d <= 1) break;
      const s = this.probe(hashes, d, nowMs);
      if (s >= 0) {
        this.slot = s;
        return d;
      }
    }
    this.slot = first;
    return 1;
  }

  /** Records that this prompt's checkpoints are going to `slot` until now + ttl. */
  record(hashes: usize, count: i32, slot: i32, ttlMs: u32, nowMs: u64): void {
    const n = checkpoints(count, this.depths);
    const expires = nowMs + <u64>ttlMs;
    // Shallowest last: the board's ring keeps the newest records, and chunk 1 is the one every
    // lookup starts from.
    for (let i = 0; i < n; i++) {
      const d = load<i32>(this.depths.ptr + ((<usize>i) << 2));
      const h = load<u64>(hashes + ((<usize>(d - 1)) << 3));
      this.cells.put(h, <u32>d, slot, expires, nowMs);
      addRoute(this.records, h, expires, <u32>d, slot, ROUTE_SPECULATIVE);
    }
  }
}
