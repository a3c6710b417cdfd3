// What a gateway's report changes in the model: its in-flight counts (replacing its previous
// ones), TTFT and connection failures per slot, the recent-decisions feed, and its speculative
// routes, which enter the prefix index until their TTL ends, and its sessions' slots (the fleet's
// session table). One function, so the HTTP service and the quality bench's virtual-time control
// plane apply reports the same way. A report relayed by a peer replica (replicas/) may name slots
// this replica does not know (UNKNOWN_SLOT): those entries are skipped, the rest applies.
import type { PrefixIndex } from "../index/prefix-index.ts";
import type { SessionTable } from "../model/session-table.ts";
import type { LoadModel } from "../model/slot-load.ts";
import type { SlotTable } from "../model/slot-table.ts";
import type { RecentDecisions } from "./recent-decisions.ts";
import { type Report, UNKNOWN_SLOT } from "./report-codec.ts";

export interface ReportTargets {
  load: LoadModel;
  slots: SlotTable;
  index: PrefixIndex;
  decisions?: RecentDecisions;
  sessions?: SessionTable;
}

export function applyReport(t: ReportTargets, report: Report, nowMs: number): void {
  let inflight = report.inflight;
  if (inflight.has(UNKNOWN_SLOT)) {
    inflight = new Map(inflight);
    inflight.delete(UNKNOWN_SLOT);
  }
  t.load.gatewayInflight(report.gateway, inflight, nowMs);
  for (const f of report.finished) {
    if (f.slot === UNKNOWN_SLOT) continue;
    if (f.ttftMs > 0) t.load.ttftObserved(f.slot, f.ttftMs);
    if (f.status === 0) t.load.failed(f.slot);
    t.decisions?.add({ ...f, gateway: report.gateway, atMs: nowMs });
  }
  for (const s of report.speculative) {
    if (t.slots.get(s.slot)?.present)
      t.index.chunks.speculate(s.hash, s.depth, s.slot, nowMs, nowMs + s.ttlMs);
  }
  // A slot the table does not have is no route: a gateway's report cannot plant one.
  for (const s of report.sessions ?? [])
    if (t.slots.get(s.slot)?.present) t.sessions?.learn(s.hash, s.slot, nowMs, s.expiresMs);
}
