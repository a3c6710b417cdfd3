// SipHash against published vectors, and Dynamo's worker ids against an independent
// implementation: CPython's str/bytes hash is SipHash-1-3 and uses zero keys under
// PYTHONHASHSEED=0, so `hash(b"<pod>\xff") % 2**64` reproduces Rust's DefaultHasher.
import { describe, expect, it } from "vitest";
import { dynamoWorkerId } from "../../control-plane/src/discovery/dynamo-worker-id.ts";
import { siphash } from "../../control-plane/src/discovery/siphash.ts";

const seq = (n: number) => Uint8Array.from({ length: n }, (_, i) => i);

describe("siphash", () => {
  it("SipHash-2-4 matches the reference vectors (key 00..0f, message 00..n-1)", () => {
    // veorq/SipHash vectors.h (the SipHash paper's appendix), selected lengths.
    const k0 = 0x0706050403020100n;
    const k1 = 0x0f0e0d0c0b0a0908n;
    const vectors: Array<[number, bigint]> = [
      [0, 0x726fdb47dd0e0e31n],
      [1, 0x74f839c593dc67fdn],
      [7, 0xab0200f58b01d137n],
      [8, 0x93f5f5799a932462n],
      [15, 0xa129ca6149be45e5n],
      [16, 0x3f2acc7f57c29bdbn],
      [31, 0x32d892fad841c342n],
      [63, 0x958a324ceb064572n],
    ];
    for (const [n, want] of vectors) expect(siphash(seq(n), k0, k1, 2, 4), `length ${n}`).toBe(want);
  });

  it("SipHash-1-3 with zero keys matches the reference implementation's vectors", () => {
    // 64-bit outputs of veorq/SipHash built with cROUNDS=1 dROUNDS=3 (as pinned in OCaml's testsuite).
    const vectors: Array<[number, bigint]> = [
      [0, 0xd1fba762150c532cn],
      [1, 0x68a914128e01e473n],
      [2, 0x010bac45c41e3669n],
      [7, 0x2f098ab0c751325an],
      [8, 0xead411e67ebe2eean],
      [9, 0x75927f9d95124362n],
      [16, 0x8972188433a5c5b7n],
      [19, 0x091f4a3329f87d19n],
      [33, 0x7fb71d24dfa4c9f6n],
    ];
    for (const [n, want] of vectors) expect(siphash(seq(n)), `length ${n}`).toBe(want);
  });
});

describe("dynamoWorkerId", () => {
  it("is SipHash-1-3(pod name ‖ 0xFF) masked to 53 bits, as CPython computes the hash", () => {
    // PYTHONHASHSEED=0 python3 -c 'print(hash(b"worker-0\xff") % 2**64)' and so on.
    const unmasked: Array<[string, bigint]> = [
      ["worker-0", 0xb2843710f49c0cffn],
      ["vllm-decode-7f9c6d5b8-x2k4q", 0xea3351df00614012n],
      ["a", 0x719b50b9a4f0e9f3n],
      ["qwen3-prefill-0", 0x7ab6995053cddb40n],
      ["llama-8b-worker-5d8f7c9b4-abcde", 0x60f7fb87685ef8a5n],
    ];
    for (const [pod, full] of unmasked) {
      expect(dynamoWorkerId(pod), pod).toBe(full & ((1n << 53n) - 1n));
      expect(dynamoWorkerId(pod) < 2n ** 53n).toBe(true);
    }
    expect(dynamoWorkerId("worker-0")).toBe(1186445869714687n);
  });

  it("hashes UTF-8 bytes, not UTF-16 code units", () => {
    expect(dynamoWorkerId("é")).not.toBe(dynamoWorkerId("\u00e9\u0000"));
    expect(dynamoWorkerId("é")).toBe(siphash(new Uint8Array([0xc3, 0xa9, 0xff])) & ((1n << 53n) - 1n));
  });
});
