// ZMQ multipart framing of vLLM/SGLang KV events: live PUB messages and replay replies.
// Only structure is checked here; payloads stay opaque bytes.

/** Sequences are u64 on the wire; kvroute keeps them as JS numbers, so anything past 2^53
 * (centuries of batches at any real rate) is treated as corrupt rather than rounded. */
export const MAX_SEQ = Number.MAX_SAFE_INTEGER;

export type FrameError = "frame_count" | "seq_size" | "seq_range";

export interface LiveMessage {
  topic: Buffer;
  seq: number;
  payload: Buffer;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; error: FrameError };

/** Reads an 8-byte big-endian unsigned sequence number. */
export function readSeq(frame: Uint8Array): Parsed<number> {
  const seq = seqOf(frame);
  return typeof seq === "number" ? { ok: true, value: seq } : { ok: false, error: seq };
}

/** readSeq without its answer's object (this runs for every message). */
function seqOf(frame: Uint8Array): number | FrameError {
  if (frame.length !== 8) return "seq_size";
  // Two 32-bit halves, not a DataView and a BigInt.
  const hi =
    (frame[0] as number) * 0x1000000 +
    (frame[1] as number) * 0x10000 +
    (frame[2] as number) * 0x100 +
    (frame[3] as number);
  const lo =
    (frame[4] as number) * 0x1000000 +
    (frame[5] as number) * 0x10000 +
    (frame[6] as number) * 0x100 +
    (frame[7] as number);
  // MAX_SEQ = 2^53 - 1: the high half holds 21 bits at most.
  if (hi > 0x1fffff) return "seq_range";
  return hi * 0x100000000 + lo;
}

export function encodeSeq(seq: number): Buffer {
  const out = Buffer.alloc(8);
  out.writeBigUInt64BE(BigInt(seq));
  return out;
}

/** `[topic, seq (8 bytes BE), payload]`; every other shape is malformed. */
export function parseLiveMessage(frames: readonly Buffer[]): Parsed<LiveMessage> {
  if (frames.length !== 3) return { ok: false, error: "frame_count" };
  const seq = seqOf(frames[1] as Buffer);
  if (typeof seq !== "number") return { ok: false, error: seq };
  return { ok: true, value: { topic: frames[0] as Buffer, seq, payload: frames[2] as Buffer } };
}

/** The replay end marker's sequence: -1 as a signed 64-bit integer. */
function isEndSeq(frame: Uint8Array): boolean {
  if (frame.length !== 8) return false;
  for (const byte of frame) if (byte !== 0xff) return false;
  return true;
}

export type ReplayFrame =
  | { kind: "batch"; topic: Buffer | null; seq: number; payload: Buffer }
  | { kind: "end" };

/**
 * A DEALER receives the ROUTER's reply without the identity frame:
 * `["", topic, seq8, payload]` (vLLM with the replay topic fix, v0.26+) or `["", seq8, payload]`
 * (older vLLM, SGLang); the end marker is `["", "", 0xFF×8, ""]` or `["", 0xFF×8, ""]`.
 * The number of frames after the empty delimiter tells the two layouts apart.
 */
export function parseReplayFrames(frames: readonly Buffer[]): Parsed<ReplayFrame> {
  if (frames.length !== 3 && frames.length !== 4) return { ok: false, error: "frame_count" };
  if ((frames[0] as Buffer).length !== 0) return { ok: false, error: "frame_count" };
  const withTopic = frames.length === 4;
  const topic = withTopic ? (frames[1] as Buffer) : null;
  const seqFrame = frames[withTopic ? 2 : 1] as Buffer;
  const payload = frames[withTopic ? 3 : 2] as Buffer;
  if (isEndSeq(seqFrame)) return { ok: true, value: { kind: "end" } };
  const seq = readSeq(seqFrame);
  if (!seq.ok) return seq;
  return { ok: true, value: { kind: "batch", topic, seq: seq.value, payload } };
}
