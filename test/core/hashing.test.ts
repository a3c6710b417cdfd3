// XXH64 against an independent implementation, and the chunk chain's incremental contract.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import xxhash from "xxhash-wasm";
import {
  type ChunkState,
  chunkHashes,
  feedChunks,
  initialState,
  rootHash,
  xxh64,
} from "../../control-plane/src/core/kvroute-core.ts";
import { seededRandom } from "../../control-plane/src/tokens/random-conversations.ts";
import { utf8 } from "./helpers.ts";

const { h64Raw } = await xxhash();

function randomBytes(rand: () => number, n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(rand() * 256);
  return b;
}

describe("xxh64", () => {
  it("equals xxhash-wasm on 5000 random inputs and seeds", () => {
    const rand = seededRandom(7);
    for (let i = 0; i < 5000; i++) {
      const n = i < 300 ? i : Math.floor(rand() * 3000);
      const b = randomBytes(rand, n);
      const seed = BigInt.asUintN(
        64,
        (BigInt(Math.floor(rand() * 2 ** 32)) << 32n) | BigInt(Math.floor(rand() * 2 ** 32)),
      );
      expect(xxh64(b, seed)).toBe(h64Raw(b, seed));
    }
  });

  it("hashes a 4 MiB input like xxhash-wasm (the I/O region grows)", () => {
    const b = randomBytes(seededRandom(8), 4 << 20);
    expect(xxh64(b, 5n)).toBe(h64Raw(b, 5n));
  });
});

describe("chunk chain", () => {
  it("h0 covers model ‖ 0 ‖ lora ‖ 0 ‖ salt, so moving bytes between fields changes it", () => {
    expect(rootHash("ab", "", "")).toBe(h64Raw(utf8.encode("ab\0\0"), 0n));
    expect(rootHash("a", "b", "")).not.toBe(rootHash("ab", "", ""));
    expect(rootHash("a", "", "b")).not.toBe(rootHash("a", "b", ""));
  });

  it("any split of the stream gives the same hashes as one piece (property)", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 2000 }),
        fc.array(fc.nat(2000), { maxLength: 12 }),
        fc.integer({ min: 1, max: 300 }),
        fc.string({ maxLength: 8 }),
        (stream, cuts, chunkSize, salt) => {
          const whole = chunkHashes({ model: "m", cacheSalt: salt, stream, chunkSize });
          const points = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b);
          let state: ChunkState = initialState("m", "", salt);
          const got: bigint[] = [];
          let from = 0;
          for (const to of [...points, stream.length]) {
            const r = feedChunks(state, stream.subarray(from, to), chunkSize);
            got.push(...r.hashes);
            state = r.state;
            from = to;
          }
          expect(got).toEqual([...whole]);
          expect(state.partial).toEqual(stream.subarray(stream.length - (stream.length % chunkSize)));
        },
      ),
      { numRuns: 300, seed: 42 },
    );
  });

  it("byte-by-byte feeding equals one piece, and the state is plain data (survives JSON via strings)", () => {
    const stream = randomBytes(seededRandom(9), 1000);
    const whole = chunkHashes({ model: "m", lora: "l", stream, chunkSize: 64 });
    let state = initialState("m", "l");
    const got: bigint[] = [];
    for (const b of stream) {
      const r = feedChunks(state, Uint8Array.of(b), 64);
      got.push(...r.hashes);
      // Store and reload the state as a control plane would.
      const stored = JSON.stringify({ prev: r.state.prev.toString(), partial: [...r.state.partial] });
      const back = JSON.parse(stored) as { prev: string; partial: number[] };
      state = { prev: BigInt(back.prev), partial: Uint8Array.from(back.partial) };
    }
    expect(got).toEqual([...whole]);
    expect(whole.length).toBe(15);
  });

  it("rejects a chunk size below 1", () => {
    expect(() => feedChunks(initialState("m"), new Uint8Array(10), 0)).toThrow(RangeError);
  });
});
