// Turns the model into shared-data publications in the sync log: the whole key space once per
// epoch (configuration and slots first, so a resyncing gateway never reads bucket bitmaps against
// a slot table from another epoch), then on every publish the images that changed. The HTTP
// service runs publish() on a short timer; the quality bench's virtual-time control plane on its
// virtual clock.
import type { PrefixIndex } from "../index/prefix-index.ts";
import type { SessionTable } from "../model/session-table.ts";
import type { LoadModel } from "../model/slot-load.ts";
import type { SlotTable } from "../model/slot-table.ts";
import type { SyncChange, SyncLog } from "../sync/sync-log.ts";
import { encodeLoadImage, encodeRosterImage, encodeSlotsImage } from "./images.ts";

/** A gateway that has not reported for this long is gone: its in-flight counts no longer apply. */
export const GATEWAY_SILENCE_MS = 10_000;

export interface PublisherParts {
  log: SyncLog;
  index: PrefixIndex;
  slots: SlotTable;
  load: LoadModel;
  /** Pool name → its index in kvr.cfg. */
  poolIndex: (name: string) => number;
  /** The fleet's session → slot table (kvr.sc.<j>); none: no session keys are published. */
  sessions?: SessionTable;
  /** An adapter's id in its pool's kvr.cfg table (model/adapter-catalog.ts), -1 when not there. */
  adapterId?: (pool: string, adapter: string) => number;
}

export class Publisher {
  #cfgChanged = false;

  constructor(private readonly p: PublisherParts) {
    // The buckets are the log's key table: their images and patches stay in the core.
    p.log.attach(p.index.published);
  }

  /** A new kvr.cfg within the epoch (an adapter table grew): published with the next load image,
   * whose adapter ids it explains. */
  updateCfg(cfgImage: Uint8Array): void {
    this.p.log.publish([["kvr.cfg", cfgImage]]);
    this.#cfgChanged = true;
  }

  /** The start of an epoch: kvr.cfg, then everything publish() covers, then every bucket. */
  start(cfgImage: Uint8Array, nowMs: number): void {
    this.p.log.publish([["kvr.cfg", cfgImage]]);
    // Every epoch carries a roster, changed or not (publish() below then adds none of its own).
    this.p.load.takeGatewaysChanged();
    this.p.log.publish([["kvr.gw", encodeRosterImage(this.p.load.gateways())]]);
    this.p.index.markAllDirty();
    this.publish(nowMs);
    if (this.p.sessions !== undefined) this.p.log.publish(this.p.sessions.allImages());
  }

  /** Expires speculative routes, sessions and silent gateways, then publishes the images that changed. */
  publish(nowMs: number): void {
    const { log, index, slots, load, poolIndex, sessions } = this.p;
    index.chunks.expire(nowMs);
    sessions?.expire(nowMs);
    load.expireGateways(nowMs, GATEWAY_SILENCE_MS);
    const changes: SyncChange[] = [];
    const slotsChanged = slots.takeChanged();
    if (slotsChanged) changes.push(["kvr.slots", encodeSlotsImage(slots.all(), poolIndex)]);
    // A new slot needs its row in the load image even when its load reads like the default:
    // gateways treat slots past the image's end as unhealthy.
    const cfgChanged = this.#cfgChanged;
    this.#cfgChanged = false;
    if (load.takeChanged() || slotsChanged || cfgChanged)
      changes.push(["kvr.load", encodeLoadImage(slots.all(), (id) => load.get(id), this.p.adapterId)]);
    if (load.takeGatewaysChanged()) changes.push(["kvr.gw", encodeRosterImage(load.gateways())]);
    if (changes.length > 0) log.publish(changes);
    // The dirty buckets whose rows changed, in one core call; gateways that read patches get the rows.
    log.commitTable(index.published.publishDirty(log.version + 1));
    if (sessions !== undefined) log.publish(sessions.takeDirtyImages());
  }
}
