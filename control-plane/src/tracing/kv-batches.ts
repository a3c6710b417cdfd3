// A span per KV-event batch applied to the index, for a sampled share of batches: an engine
// publishes a batch per step per rank, far too many to trace each. The share is the
// configuration's `tracing.kvEventBatchRatio`; a sampled batch's span covers applying it (the
// index's fast path, or the events delivered one by one) and says what it held.
import type { Span } from "@opentelemetry/api";
import type { BatchMeta, EventSink, KvEvent, ScannedBatch } from "../vocabulary/kv-events.ts";
import { tracer } from "./tracer.ts";

/** The sink with sampled batches traced; the sink itself when nothing would be recorded. */
export function tracedEventSink(
  sink: EventSink,
  ratio: number,
  random: () => number = Math.random,
): EventSink {
  if (ratio <= 0) return sink;
  const sampled = () => ratio >= 1 || random() < ratio;
  // Event by event: a batch is the events that share one meta; delivery is synchronous, so the
  // span ends in the microtask after the batch's last event.
  let current: { meta: BatchMeta; span: Span | null; events: number } | null = null;
  const traced: EventSink = {
    event(slotKey: string, event: KvEvent, meta: BatchMeta) {
      if (current?.meta !== meta) {
        const span = sampled()
          ? tracer.startSpan("kvroute.kv_events.batch", {
              attributes: {
                "kvroute.slot": slotKey,
                "kvroute.seq": meta.seq,
                "kvroute.replayed": meta.replayed,
              },
            })
          : null;
        const batch = { meta, span, events: 0 };
        current = batch;
        if (span !== null)
          queueMicrotask(() => {
            span.setAttribute("kvroute.events", batch.events);
            span.end();
            if (current === batch) current = null;
          });
      }
      current.events++;
      sink.event(slotKey, event, meta);
    },
    rankReset: (slotKey, reason) => sink.rankReset(slotKey, reason),
  };
  const { scanBatch, applyScanned } = sink;
  if (scanBatch !== undefined && applyScanned !== undefined) {
    const scanned = new Map<string, ScannedBatch>();
    traced.scanBatch = (slotKey, payload) => {
      const batch = scanBatch.call(sink, slotKey, payload);
      if (batch !== null) scanned.set(slotKey, batch);
      return batch;
    };
    traced.applyScanned = (slotKey) => {
      const batch = scanned.get(slotKey);
      scanned.delete(slotKey);
      if (batch === undefined || !sampled()) return applyScanned.call(sink, slotKey);
      const span = tracer.startSpan("kvroute.kv_events.batch", {
        attributes: {
          "kvroute.slot": slotKey,
          "kvroute.stored_blocks": batch.storedBlocks,
          "kvroute.removed_blocks": batch.removedBlocks,
          "kvroute.events": Object.values(batch.events).reduce((n, c) => n + c, 0),
          ...(batch.rank === null ? {} : { "kvroute.rank": batch.rank }),
        },
      });
      try {
        applyScanned.call(sink, slotKey);
      } finally {
        span.end();
      }
    };
  }
  return traced;
}
