// This VM's side of the gateway board `kvr.gwb` (filter/core/gateway-board.ts has the layout): one
// shared-data read brings what the gateway's other VMs did since this VM last looked — their
// unanswered requests, their LoRA requests in flight, the routes they took, the buckets the
// leader's sync rewrote — and one CAS write publishes this VM's. A decision reads it once and writes it once; so does a request's end
// and every tick. A lost CAS race keeps this VM's records for its next write (the next read brings
// the fresh cas); nothing is retried on the request path.
import { ByteBuf } from "../core/byte-buf";
import {
  BoardEdit,
  BoardView,
  CHANGE_RING,
  entrySince,
  FLIGHT_ENTRY,
  flightEntry,
  nextFlights,
  nextSection,
  ROUTE_RING,
  ROUTE_SESSION,
  sectionCount,
  sectionEntries,
  sectionEntry,
  sectionStamp,
  sectionThread,
  trimRoutes,
  writeBoard,
} from "../core/gateway-board";
import { LoraAffinity } from "../core/lora-affinity";
import { LocalQueue } from "../core/queued-work";
import { RouteCells } from "../core/route-cells";
import { CachedBuckets } from "./bucket-cache";
import { OK, SharedBytes, setSharedKey } from "./host";

export const BOARD_KEY = "kvr.gwb";
const BOARD_KEY_BYTES = String.UTF8.encode(BOARD_KEY);
/** Over a key read as absent any cas succeeds; this one fails once another VM created it meanwhile. */
const ABSENT_CAS: u32 = 0xffffffff;

export class GatewayBoard {
  /** The value last read, in place: the view points into it until the next read. */
  private value: SharedBytes = new SharedBytes();
  private view: BoardView = new BoardView();
  private out: ByteBuf = new ByteBuf(8192);
  /** The cas of the value last read; false once a write made it stale (a write needs a read first). */
  private current: bool = false;
  private cas: u32 = 0;
  private seenChange: u64 = 0;
  private seenRoute: u64 = 0;
  private primed: bool = false;
  /** What this VM publishes next: its records and, on the leader, the reported share. */
  edit: BoardEdit = new BoardEdit();
  /** This VM's section entries as its last landed write put them, and under which thread (-2: none yet). */
  private published: ByteBuf = new ByteBuf(256);
  private publishedThread: i32 = -2;
  private entries: ByteBuf = new ByteBuf(256);

  constructor(
    private buckets: CachedBuckets,
    private speculative: RouteCells,
    private sessions: RouteCells,
    private lora: LoraAffinity,
  ) {}

  /**
   * Reads the board (one shared-data read) and applies its news: changed buckets and fleet
   * session keys forgotten, other VMs' routes remembered, their requests and the leader's
   * reported share into `queue`'s gateway view.
   */
  refresh(me: i32, queue: LocalQueue, freshMs: u64, now: u64): void {
    const r = this.value;
    r.read(BOARD_KEY_BYTES);
    const found = r.status === OK;
    const ok = found && this.view.open(r.ptr, r.len);
    // A damaged value is rewritten whole by the next write, over the cas read here.
    this.cas = found ? r.cas : ABSENT_CAS;
    this.current = true;
    if (!ok) {
      this.view.open(0, 0);
      if (this.primed) this.forgetAll();
      this.seenChange = 0;
      this.seenRoute = 0;
    }
    this.applyChanges();
    this.applyRoutes(now);
    this.applySiblings(me, queue, freshMs, now);
    this.primed = true;
  }

  /** Writes this VM's section and records (one CAS write over the last read); whether it landed. */
  publish(thread: i32, queue: LocalQueue, freshMs: u64, now: u64): bool {
    if (!this.current) return false;
    const e = this.edit;
    e.thread = thread;
    e.queue = queue;
    e.now = now;
    e.freshMs = freshMs;
    const flights = this.lora.flights;
    e.flights.len = 0;
    e.flights.reserve(flights * FLIGHT_ENTRY);
    this.lora.encodeFlights(e.flights.ptr);
    e.flights.len = flights * FLIGHT_ENTRY;
    trimRoutes(e.routes);
    writeBoard(this.view, e, this.out);
    this.current = false;
    // A lost race: the records stay in `edit` for the next write.
    if (setSharedKey(BOARD_KEY_BYTES, this.out.ptr, this.out.len, this.cas) !== OK) return false;
    // Its own route records are in its tables already: the next read starts after them (other
    // VMs' records before them were applied by the read this write followed).
    this.seenRoute = load<u64>(this.out.ptr, 16);
    e.clearRecords();
    e.reported = null;
    // What the other VMs now read of this VM: its section's entries, as the write just laid them out.
    this.publishedThread = thread;
    const mine = this.published;
    mine.len = 0;
    if (e.entriesAt >= 0) mine.append(this.out.ptr + <usize>e.entriesAt, e.entriesEnd - e.entriesAt);
    return true;
  }

  /**
   * Whether a write now would show the other VMs anything new: records to append, a reported share,
   * or a section that differs from the one this VM's last landed write left (a request's end that
   * the engine's metrics already show changes none of its counts). The stamp is not compared: every
   * tick refreshes it.
   */
  wouldChange(thread: i32, queue: LocalQueue): bool {
    const e = this.edit;
    if (e.routes.len !== 0 || e.changes.len !== 0 || e.changeFlood || e.reported !== null) return true;
    if (thread !== this.publishedThread) return true;
    if (thread < 0) return false;
    const now = this.entries;
    sectionEntries(queue, now);
    const before = this.published;
    return now.len !== before.len || memory.compare(now.ptr, before.ptr, <usize>now.len) !== 0;
  }

  private forgetAll(): void {
    this.buckets.flush();
  }

  private applyChanges(): void {
    const b = this.view;
    const seq = b.changeSeq;
    if (!this.primed) {
      // Nothing was cached before this VM's first read.
      this.seenChange = seq;
      return;
    }
    if (seq < this.seenChange || seq - this.seenChange > CHANGE_RING) {
      this.forgetAll();
    } else {
      for (let n = this.seenChange; n < seq; n++) this.buckets.invalidate(b.changeAt(n));
    }
    this.seenChange = seq;
  }

  private applyRoutes(now: u64): void {
    const b = this.view;
    const seq = b.routeSeq;
    let from = this.seenRoute;
    if (seq < from) from = 0;
    // More than the ring holds since the last read: the oldest are gone (best effort, see docs).
    if (seq - from > ROUTE_RING) from = seq - ROUTE_RING;
    for (let n = from; n < seq; n++) {
      const e = b.routeAt(n);
      const cells = load<u16>(e, 22) === ROUTE_SESSION ? this.sessions : this.speculative;
      cells.put(load<u64>(e), load<u32>(e, 16), <i32>load<u16>(e, 20), load<u64>(e, 8), now);
    }
    this.seenRoute = seq;
  }

  private applySiblings(me: i32, queue: LocalQueue, freshMs: u64, now: u64): void {
    queue.clearGatewayView();
    this.lora.clearSiblings();
    const b = this.view;
    const p = b.ptr;
    if (p === 0) return;
    for (let i = 0; i < b.reportedCount; i++) {
      const e = b.reportedAt(i);
      queue.setGatewayReported(<i32>load<u16>(e), load<u32>(e, 2));
    }
    let at = b.sectionsAt;
    for (let i = 0; i < b.vmCount; i++) {
      if (sectionThread(p, at) !== me && sectionStamp(p, at) + freshMs >= now) {
        const n = sectionCount(p, at);
        for (let k = 0; k < n; k++) {
          const e = sectionEntry(p, at, k);
          queue.addSiblings(
            <i32>load<u16>(e),
            load<u32>(e, 2),
            <f64>load<u32>(e, 6),
            load<u32>(e, 10),
            load<u32>(e, 14),
            entrySince(e, now),
          );
        }
      }
      at = nextSection(p, at);
    }
    // The other VMs' LoRA requests in flight per (slot, adapter) (lora-affinity.ts).
    let f = b.flightsAt;
    for (let i = 0; i < b.flightCount; i++) {
      if (sectionThread(p, f) !== me && sectionStamp(p, f) + freshMs >= now) {
        const n = sectionCount(p, f);
        for (let k = 0; k < n; k++) {
          const e = flightEntry(p, f, k);
          this.lora.addSibling(<i32>load<u16>(e), <i32>load<u16>(e, 2), load<u32>(e, 4));
        }
      }
      f = nextFlights(p, f);
    }
  }
}
