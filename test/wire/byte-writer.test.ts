import { describe, expect, it } from "vitest";
import { ByteWriter } from "../../control-plane/src/common/byte-writer.ts";

describe("ByteWriter", () => {
  it("keeps every value across buffer growth, little-endian", () => {
    const w = new ByteWriter();
    for (let i = 0; i < 1000; i++)
      w.u8(i & 0xff)
        .u16(i)
        .u32(i * 65537)
        .u64(BigInt(i) << 40n)
        .f32(i / 4)
        .str16(`s${i}`);
    const out = w.finish();
    const view = new DataView(out.buffer);
    let at = 0;
    for (let i = 0; i < 1000; i++) {
      expect(view.getUint8(at)).toBe(i & 0xff);
      expect(view.getUint16(at + 1, true)).toBe(i);
      expect(view.getUint32(at + 3, true)).toBe((i * 65537) >>> 0);
      expect(view.getBigUint64(at + 7, true)).toBe(BigInt(i) << 40n);
      expect(view.getFloat32(at + 15, true)).toBe(i / 4);
      const len = view.getUint16(at + 19, true);
      expect(new TextDecoder().decode(out.subarray(at + 21, at + 21 + len))).toBe(`s${i}`);
      at += 21 + len;
    }
    expect(at).toBe(out.length);
  });

  it("refuses a string longer than its u16 length field", () => {
    expect(() => new ByteWriter().str16("x".repeat(70_000))).toThrow(/too long/);
  });
});
