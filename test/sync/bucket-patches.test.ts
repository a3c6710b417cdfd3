// Buckets reach gateways as patches of the images they hold (ChunkIndex.publishBucket,
// filter/core/bucket-patch.ts). Whatever the index does and whenever a gateway polls, a gateway
// that applies what the log serves ends with the log's bytes, and those hold exactly the rows a
// fresh encoding of the index would.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { core } from "../../control-plane/src/core/core-wasm.ts";
import { decodeBucket } from "../../control-plane/src/index/bucket-image.ts";
import { ChunkIndex } from "../../control-plane/src/index/chunk-index.ts";
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

type Step = { chunk: number; slot: number; remove: boolean; poll: boolean };
const step: fc.Arbitrary<Step> = fc.record({
  chunk: fc.nat(30),
  slot: fc.nat(100),
  remove: fc.boolean(),
  poll: fc.boolean(),
});

describe("bucket patches", () => {
  it("leave a polling gateway with the log's bytes and the index's rows", () => {
    fc.assert(
      fc.property(
        fc.array(step, { maxLength: 120 }),
        fc.integer({ min: 60, max: 4000 }),
        (steps, pageBytes) => {
          const index = new ChunkIndex(BUCKETS);
          const log = new SyncLog();
          const gateway = new Map<string, Uint8Array>();
          let version = 0;
          // Mid-way through a paged catch-up the keys not served yet are older than `version`:
          // patches are asked for only from a complete state (as the filter does).
          let partial = false;
          const poll = () => {
            for (;;) {
              const { entries, more } = log.changesSince(version, pageBytes, !partial);
              for (const e of entries)
                gateway.set(e.key, e.patch ? applyPatch(gateway.get(e.key), e.value) : e.value);
              version = entries.at(-1)?.version ?? version;
              partial = more;
              if (!more) return;
            }
          };
          try {
            log.publish(
              Array.from({ length: BUCKETS }, (_, b) => [key(b), index.encodeBucket(b, WAYS, SLOT_WORDS)]),
            );
            index.takeDirty();
            for (const s of steps) {
              if (s.remove) index.remove(hashOf(s.chunk), s.slot);
              else index.add(hashOf(s.chunk), 1 + (s.chunk % 4), s.slot, s.chunk);
              for (const b of index.takeDirty()) {
                const p = index.publishBucket(b, WAYS, SLOT_WORDS, log.get(key(b)));
                if (p !== null)
                  log.publish([p.patch === null ? [key(b), p.image] : [key(b), p.image, p.patch]]);
              }
              if (s.poll) poll();
            }
            poll();
            for (let b = 0; b < BUCKETS; b++) {
              expect(gateway.get(key(b))).toEqual(log.get(key(b)));
              expect(rowSet(log.get(key(b)) as Uint8Array)).toEqual(
                rowSet(index.encodeBucket(b, WAYS, SLOT_WORDS)),
              );
            }
          } finally {
            index.dispose();
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it("serves a patch only to a gateway that asks for them and holds a value it starts from", () => {
    const index = new ChunkIndex(1);
    const log = new SyncLog();
    log.publish([[key(0), index.encodeBucket(0, WAYS, SLOT_WORDS)]]);
    const publish = () => {
      const p = index.publishBucket(0, WAYS, SLOT_WORDS, log.get(key(0)));
      if (p !== null) log.publish([p.patch === null ? [key(0), p.image] : [key(0), p.image, p.patch]]);
    };
    for (let c = 1; c <= 3; c++) {
      index.add(hashOf(c), 1, c, c);
      publish();
    }
    // Versions: 1 the empty image, 2..4 one row more each (2 as a value: its one-row patch is no
    // smaller than the image). From 2, the two puts joined: header + 2 × (1 + 32) bytes, smaller
    // than the 4 + 3 × 32-byte image.
    const [fromTwo] = log.changesSince(2, 1 << 20, true).entries;
    expect(fromTwo?.patch).toBe(true);
    expect(fromTwo?.value.length).toBe(4 + 2 * 33);
    // From 1 no patch list reaches back (version 2 was a value): the value.
    expect(log.changesSince(1, 1 << 20, true).entries[0]?.patch).toBeUndefined();
    expect(log.changesSince(2, 1 << 20, false).entries[0]?.patch).toBeUndefined();
    // A gateway with nothing (version 0) gets the value.
    expect(log.changesSince(0, 1 << 20, true).entries[0]?.patch).toBeUndefined();
    // Patches are kept only while together smaller than the value: after many changes an old
    // version gets the value, a recent one a patch.
    for (let c = 4; c <= 40; c++) {
      index.add(hashOf(c), 1, c % 100, c);
      publish();
    }
    expect(log.changesSince(2, 1 << 20, true).entries[0]?.patch).toBeUndefined();
    expect(log.changesSince(log.version - 1, 1 << 20, true).entries[0]?.patch).toBe(true);
    index.dispose();
  });

  it("refuses a patch that does not fit the image it is applied to", () => {
    const put = new Uint8Array(4 + 1 + 32);
    put.set([SLOT_WORDS, 0, 1, 0, 1]);
    // A drop of a row the image lacks, and a patch of another width than the image's.
    const drop = new Uint8Array([SLOT_WORDS, 0, 1, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 0]);
    expect(() => applyPatch(new Uint8Array([0, SLOT_WORDS, 0, 0]), drop)).toThrow(/did not apply/);
    expect(() => applyPatch(new Uint8Array([0, 3, 0, 0]), put)).toThrow(/did not apply/);
    expect(() => applyPatch(undefined, put.subarray(0, 20))).toThrow(/did not apply/);
    expect(decodeBucket(applyPatch(undefined, put))).toHaveLength(1);
  });
});
