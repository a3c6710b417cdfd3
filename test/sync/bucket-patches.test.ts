// Buckets reach gateways as patches of the images they hold (the core's bucket journal,
// filter/core/bucket-journal.ts, served by the sync log through index/published-buckets.ts), and
// a bucket is re-encoded only when a change can show in its rows (chunk-table.ts visible).
// Whatever the index does, whenever a gateway polls and however small the journal, a gateway
// that applies what the log serves ends with the log's bytes, and those hold exactly the rows a
// fresh encoding of the index would.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { core } from "../../control-plane/src/core/core-wasm.ts";
import { decodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { ChunkIndex } from "../../control-plane/src/index/chunk-index.ts";
import { type FullKeep, PublishedBuckets } from "../../control-plane/src/index/published-buckets.ts";
import { TIER_CPU, TIER_GPU, TIER_STORAGE, type Tier } from "../../control-plane/src/index/tier.ts";
import { encodeSyncPage, SyncFlags } from "../../control-plane/src/sync/sync-codec.ts";
import { SyncLog } from "../../control-plane/src/sync/sync-log.ts";

const BUCKETS = 4;
const WAYS = 5;
const SLOT_WORDS = 2;
const hashOf = (chunk: number) => (BigInt(chunk) * 0x9e3779b97f4a7c15n) & 0xffff_ffff_ffff_ffffn;
const key = (b: number) => `kvr.b.${b}`;

/** The core's patch application (what the filter's leader runs) over a held image. */
function applyPatch(held: Uint8Array | undefined, patch: Uint8Array): Uint8Array {
  const c = core();
  const image = held ?? new Uint8Array();
  const at = c.io(image.length + patch.length);
  c.u8.set(image, at);
  c.u8.set(patch, at + image.length);
  const n = c.ex.bucketPatchIo(at, image.length, at + image.length, patch.length);
  if (n < 0) throw new Error(`patch did not apply: ${n}`);
  return c.bytes(c.ex.patchedOutPtr(), n);
}

const rowSet = (image: Uint8Array) =>
  decodeBucket(image)
    .map((r) => `${r.hash}/${r.tier}/${r.depth}/${r.slots.join(",")}`)
    .sort();

/** An index of `buckets` published through a sync log: the setup every case here shares. */
function publication(
  buckets: number,
  options: Partial<ConstructorParameters<typeof PublishedBuckets>[2]> = {},
) {
  const index = new ChunkIndex(buckets);
  const published = new PublishedBuckets(core(), index, {
    buckets,
    ways: WAYS,
    slotWords: SLOT_WORDS,
    ...options,
  });
  const log = new SyncLog();
  log.attach(published);
  const publish = () => log.commitTable(published.publishDirty(log.version + 1));
  const dispose = () => {
    published.dispose();
    index.dispose();
  };
  return { index, log, publish, dispose };
}

/** Every bucket's published rows are the rows a fresh encoding of the index gives. */
function expectIndexRows(log: SyncLog, index: ChunkIndex, buckets: number): void {
  for (let b = 0; b < buckets; b++)
    expect(rowSet(log.get(key(b)) as Uint8Array)).toEqual(rowSet(index.encodeBucket(b, WAYS, SLOT_WORDS)));
}

type Step = { chunk: number; slot: number; tier: Tier; remove: boolean; poll: boolean };
const step: fc.Arbitrary<Step> = fc.record({
  chunk: fc.nat(30),
  // Mostly slots of the first 32-slot segment; some in others (a chunk's group then has several
  // rows), one beyond the images' SLOT_WORDS × 64 slots (never written).
  slot: fc.oneof(fc.nat(7), fc.constantFrom(33, 70, 101, 130)),
  tier: fc.constantFrom<Tier>(TIER_GPU, TIER_GPU, TIER_CPU, TIER_STORAGE),
  remove: fc.boolean(),
  // Rare polls: a gateway far behind needs long chains, which a small journal overwrites.
  poll: fc.nat(7).map((n) => n === 0),
});

describe("bucket patches", () => {
  it("leave a polling gateway with the log's bytes and the index's rows", () => {
    fc.assert(
      fc.property(
        // Long enough that buckets fill and go to full mode (fast-check's default size stays under 10).
        fc.array(step, { minLength: 40, maxLength: 200 }),
        fc.integer({ min: 60, max: 4000 }),
        fc.integer({ min: 64, max: 1024 }),
        // Buckets that index more than WAYS chunks show 2 rows (full mode), or all WAYS.
        fc.constantFrom(2, WAYS),
        // Full buckets keep their shallowest rows (encoded whole) or their newest (patched).
        fc.constantFrom<FullKeep>("shallowest", "newest"),
        (steps, pageBytes, journalBytes, fullWays, fullKeep) => {
          const { index, log, publish, dispose } = publication(BUCKETS, { journalBytes, fullWays, fullKeep });
          const gateway = new Map<string, Uint8Array>();
          let version = 0;
          // Mid-way through a paged catch-up the keys not served yet are older than `version`:
          // patches are asked for only from a complete state (as the filter does).
          let partial = false;
          const poll = () => {
            for (;;) {
              const page = log.writePage(version, pageBytes, !partial, 0, 7n);
              const { entries, more } = log.changesSince(version, pageBytes, !partial);
              const last = entries.at(-1)?.version ?? version;
              // What the sync handler serves, written in place: the entries' page, byte for byte.
              expect(page.more).toBe(more);
              expect(page.version).toBe(last);
              expect(page.body).toEqual(
                encodeSyncPage({ flags: more ? SyncFlags.more : 0, epoch: 7n, version: last, entries }),
              );
              for (const e of entries)
                gateway.set(e.key, e.patch ? applyPatch(gateway.get(e.key), e.value) : e.value);
              version = entries.at(-1)?.version ?? version;
              partial = more;
              if (!more) return;
            }
          };
          try {
            for (let b = 0; b < BUCKETS; b++) index.markDirty(b);
            publish();
            for (const s of steps) {
              // Stamps that repeat and go back (the keep rule's tie breaks) as well as new ones.
              if (s.remove) index.remove(hashOf(s.chunk), s.slot, s.tier);
              else index.add(hashOf(s.chunk), 1 + (s.chunk % 4), s.slot, (s.chunk * 7 + s.slot) % 13, s.tier);
              publish();
              // Named keys between the table's (pages mix both).
              if (s.chunk % 7 === 0)
                log.publish([[`kvr.named.${s.slot % 2}`, new Uint8Array((s.chunk % 3) + 1).fill(s.slot)]]);
              // Every change that can show is published at once (a bucket left clean by the
              // gate would show stale rows until some later change re-encoded it).
              expectIndexRows(log, index, BUCKETS);
              if (s.poll) poll();
            }
            poll();
            for (let b = 0; b < BUCKETS; b++) expect(gateway.get(key(b))).toEqual(log.get(key(b)));
            expectIndexRows(log, index, BUCKETS);
          } finally {
            dispose();
          }
        },
      ),
      { numRuns: 400 },
    );
  });

  it("hold the index's rows when several changes, removals and re-adds among them, come between publications", () => {
    // A change logged for a chunk names its record; a chunk removed before the publication frees
    // it, and the next new chunk takes it (ChunkTable.changeRecord must not read that one).
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ chunk: fc.nat(12), slot: fc.nat(3), remove: fc.boolean(), publish: fc.nat(3) }),
          {
            minLength: 20,
            maxLength: 150,
          },
        ),
        fc.constantFrom(2, WAYS),
        fc.constantFrom<FullKeep>("shallowest", "newest"),
        (steps, fullWays, fullKeep) => {
          const buckets = 2;
          const { index, log, publish, dispose } = publication(buckets, { fullWays, fullKeep });
          try {
            for (let b = 0; b < buckets; b++) index.markDirty(b);
            publish();
            steps.forEach((s, i) => {
              if (s.remove) index.remove(hashOf(s.chunk), s.slot);
              else index.add(hashOf(s.chunk), 1 + (s.chunk % 3), s.slot, i);
              if (s.publish !== 0) return;
              publish();
              expectIndexRows(log, index, buckets);
            });
          } finally {
            dispose();
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("writes a poll of many buckets in place, byte for byte the entries, with or without a page limit", () => {
    // 4096 buckets: keys of one to four digits, written by the core (BucketJournal.writeEntries).
    const buckets = 4096;
    const { index, log, publish, dispose } = publication(buckets);
    for (let b = 0; b < buckets; b++) index.markDirty(b);
    publish();
    const polled = [0, log.version];
    for (let round = 0; round < 3; round++) {
      for (let c = 0; c < 3000; c++) index.add(hashOf(round * 3000 + c), 1 + (c % 3), c % 70, round * 10 + c);
      publish();
      // A named key between the buckets' runs.
      log.publish([[`kvr.named.${round}`, new Uint8Array([round])]]);
      polled.push(log.version);
    }
    for (const since of polled)
      for (const maxBytes of [Number.MAX_SAFE_INTEGER, 5000])
        for (const patches of [true, false]) {
          const page = log.writePage(since, maxBytes, patches, 0, 3n);
          const { entries, more } = log.changesSince(since, maxBytes, patches);
          const version = entries.at(-1)?.version ?? since;
          expect(page.more).toBe(more);
          expect(page.version).toBe(version);
          expect(page.body).toEqual(
            encodeSyncPage({ flags: more ? SyncFlags.more : 0, epoch: 3n, version, entries }),
          );
        }
    dispose();
  });

  it("serves a patch only to a gateway that asks for them and holds a value it starts from", () => {
    const { index, log, publish, dispose } = publication(1);
    index.markDirty(0);
    publish();
    for (let c = 1; c <= 3; c++) {
      index.add(hashOf(c), 1, c, c);
      publish();
    }
    // Versions: 1 the empty image, 2..4 one row more each (2 as a value: its one-row patch is no
    // smaller than the image). From 2, the two puts joined: header + 2 × (1 + 16) bytes, smaller
    // than the 4 + 3 × 16-byte image.
    const [fromTwo] = log.changesSince(2, 1 << 20, true).entries;
    expect(fromTwo?.patch).toBe(true);
    expect(fromTwo?.value.length).toBe(4 + 2 * 17);
    // From 1 no patch chain reaches back (version 2 was a value): the value.
    expect(log.changesSince(1, 1 << 20, true).entries[0]?.patch).toBeUndefined();
    expect(log.changesSince(2, 1 << 20, false).entries[0]?.patch).toBeUndefined();
    // A gateway with nothing (version 0) gets the value.
    expect(log.changesSince(0, 1 << 20, true).entries[0]?.patch).toBeUndefined();
    // A joined patch goes only while smaller than the value: after many changes an old version
    // gets the value, a recent one a patch.
    for (let c = 4; c <= 40; c++) {
      index.add(hashOf(c), 1, c % 100, c);
      publish();
    }
    expect(log.changesSince(2, 1 << 20, true).entries[0]?.patch).toBeUndefined();
    expect(log.changesSince(log.version - 1, 1 << 20, true).entries[0]?.patch).toBe(true);
    dispose();
  });

  it("encodes a bucket dirtied many times between publications once, under one version", () => {
    const { index, log, publish, dispose } = publication(2);
    index.markDirty(0);
    index.markDirty(1);
    publish();
    const before = log.version;
    // Ten changes to bucket 0 (even hashes), then one to nothing: the rows a gateway gets are the last state.
    for (let c = 1; c <= 10; c++) index.add(hashOf(2 * c) & ~1n, c, c, c);
    index.add(hashOf(2) & ~1n, 1, 1, 99);
    publish();
    expect(log.version).toBe(before + 1);
    const [entry] = log.changesSince(before, 1 << 20, true).entries;
    expect(entry?.key).toBe(key(0));
    // Unchanged rows publish nothing.
    index.markDirty(0);
    publish();
    expect(log.version).toBe(before + 1);
    dispose();
  });

  it("gives a gateway the image when the journal has overwritten its bucket's patches", () => {
    // A journal of 128 bytes holds two one-row records (64 bytes each): bucket 1's two patches
    // overwrite bucket 0's, whose chain must then end (the gateway gets bucket 0's image, never
    // bucket 1's rows read where bucket 0's record was).
    const { index, log, publish, dispose } = publication(2, { journalBytes: 128 });
    const inBucket = (b: number, c: number) => (hashOf(c) & ~1n) | BigInt(b);
    index.markDirty(0);
    index.markDirty(1);
    publish();
    for (let c = 1; c <= 3; c++) {
      index.add(inBucket(0, c), 1, 0, c);
      index.add(inBucket(1, c), 1, 1, c);
      publish();
    }
    const gateway = new Map<string, Uint8Array>();
    for (const e of log.changesSince(0, 1 << 20, false).entries) gateway.set(e.key, e.value);
    const since = log.version;
    index.add(inBucket(0, 10), 1, 0, 10);
    publish();
    for (let c = 11; c <= 12; c++) {
      index.add(inBucket(1, c), 1, 1, c);
      publish();
    }
    const entries = log.changesSince(since, 1 << 20, true).entries;
    expect(entries.find((e) => e.key === key(0))?.patch).toBeUndefined();
    for (const e of entries) gateway.set(e.key, e.patch ? applyPatch(gateway.get(e.key), e.value) : e.value);
    for (let b = 0; b < 2; b++) expect(gateway.get(key(b))).toEqual(log.get(key(b)));
    dispose();
  });

  it("refuses a patch that does not fit the image it is applied to", () => {
    const put = new Uint8Array(4 + 1 + 16);
    put.set([0, 0, 1, 0, 1]);
    put[4 + 1 + 12] = 1; // slot 0
    // A drop of a row the image lacks; a patch of bitmap rows (the earlier format named its width
    // in byte 0), and an image of them; a truncated put.
    const drop = new Uint8Array([0, 0, 1, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0]);
    expect(() => applyPatch(new Uint8Array([0, 0, 0, 0]), drop)).toThrow(/did not apply/);
    const bitmapPut = put.slice();
    bitmapPut[0] = 1;
    expect(() => applyPatch(undefined, bitmapPut)).toThrow(/did not apply/);
    expect(() => applyPatch(new Uint8Array([0, 1, 0, 0]), put)).toThrow(/did not apply/);
    expect(() => applyPatch(undefined, put.subarray(0, 20))).toThrow(/did not apply/);
    expect(decodeBucket(applyPatch(undefined, put))).toEqual([{ hash: 0n, depth: 0, tier: 0, slots: [0] }]);
  });
});
