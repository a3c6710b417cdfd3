// This VM's view of the routing cache in shared data: the decoded cfg / slots / load images,
// refreshed on ticks when their shared-data cas changed (never read or decoded per request). The
// prefix walk's buckets are kept by bucket-cache.ts.
import {
  CfgImage,
  decodeCfg,
  decodeLoad,
  decodeRoster,
  decodeSlots,
  imageError,
  LoadImage,
  RosterImage,
  SlotsImage,
} from "../core/cache-images";
import { getShared, LOG_WARN, log, SharedValue } from "./host";

export const CFG_KEY = "kvr.cfg";
export const SLOTS_KEY = "kvr.slots";
export const LOAD_KEY = "kvr.load";
export const ROSTER_KEY = "kvr.gw";

export class CacheView {
  cfg: CfgImage | null = null;
  slots: SlotsImage | null = null;
  load: LoadImage | null = null;
  /** The gateways that report now; null until the control plane publishes one (older ones never do). */
  roster: RosterImage | null = null;
  /** This gateway's place in the roster and the roster's size (-1, 0: no share), found once per
   * roster or gateway change rather than per request. */
  rosterPlace: i32 = -1;
  rosterSize: i32 = 0;
  private gateway: u64 = 0;
  private cfgCas: u32 = 0;
  private rosterCas: u32 = 0;
  private slotsCas: u32 = 0;
  private loadCas: u32 = 0;
  private read: SharedValue = new SharedValue();

  /** Changes whenever a new kvr.load image is read (its shared-data cas). */
  get loadRound(): u32 {
    return this.loadCas;
  }

  get ready(): bool {
    return this.cfg !== null && this.slots !== null && this.load !== null;
  }

  refresh(): void {
    const r = this.read;
    getShared(CFG_KEY, r);
    if (r.value !== null && r.cas !== this.cfgCas) {
      const v = r.value!;
      const c = decodeCfg(changetype<usize>(v), v.byteLength);
      if (c !== null) this.cfg = c;
      else
        log(
          LOG_WARN,
          `kvroute: ignoring a malformed ${CFG_KEY} image (code ${imageError}); keeping the previous one`,
        );
      this.cfgCas = r.cas;
      // A new configuration can change the pool count the slot table is checked against.
      this.slotsCas = 0;
    }
    const cfg = this.cfg;
    if (cfg === null) return;
    getShared(SLOTS_KEY, r);
    if (r.value !== null && r.cas !== this.slotsCas) {
      const v = r.value!;
      const s = decodeSlots(changetype<usize>(v), v.byteLength, cfg.pools.length);
      if (s !== null) this.slots = s;
      else log(LOG_WARN, `kvroute: ignoring a malformed ${SLOTS_KEY} image (code ${imageError})`);
      this.slotsCas = r.cas;
    }
    getShared(LOAD_KEY, r);
    if (r.value !== null && r.cas !== this.loadCas) {
      const v = r.value!;
      const l = decodeLoad(changetype<usize>(v), v.byteLength);
      if (l !== null) this.load = l;
      else log(LOG_WARN, `kvroute: ignoring a malformed ${LOAD_KEY} image (code ${imageError})`);
      this.loadCas = r.cas;
    }
    getShared(ROSTER_KEY, r);
    if (r.value !== null && r.cas !== this.rosterCas) {
      const v = r.value!;
      const g = decodeRoster(changetype<usize>(v), v.byteLength);
      if (g !== null) this.roster = g;
      else log(LOG_WARN, `kvroute: ignoring a malformed ${ROSTER_KEY} image (code ${imageError})`);
      this.rosterCas = r.cas;
      this.place();
    }
  }

  /** This gateway's id hash as kvr.gw lists it (route-decision.ts gatewaySeed); 0: take no share. */
  setGateway(hash: u64): void {
    this.gateway = hash;
    this.place();
  }

  private place(): void {
    const roster = this.roster;
    this.rosterPlace = roster !== null && this.gateway !== 0 ? roster.indexOf(this.gateway) : -1;
    this.rosterSize = this.rosterPlace >= 0 ? (roster as RosterImage).count : 0;
  }
}

export const cache = new CacheView();
