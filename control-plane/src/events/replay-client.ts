// Client of the engine's replay ROUTER (vLLM ZmqEventPublisher, SGLang's port of it).
// Request: a DEALER sends `["", start_seq (8 bytes BE)]`; the engine answers every buffered
// batch with seq ≥ start, then an end marker (layouts in frames.ts).

import { Dealer } from "zeromq";
import { encodeSeq, parseReplayFrames } from "./frames.ts";

export interface ReplayedBatch {
  seq: number;
  /** Null from engines that predate the replay topic frame. */
  topic: Buffer | null;
  payload: Buffer;
}

export type ReplayFailure = "timeout" | "malformed" | "too_many" | "socket";

export type ReplayResult =
  | { ok: true; batches: ReplayedBatch[] }
  | { ok: false; reason: ReplayFailure; batches: ReplayedBatch[] };

export interface ReplayOptions {
  /** Whole-request deadline; the engine answers from memory, so seconds are plenty. */
  timeoutMs: number;
  /** Upper bound on batches accepted (vLLM keeps buffer_steps = 10 000 by default). */
  maxBatches: number;
  /** Aborting closes the socket at once (used on shutdown). */
  signal?: AbortSignal;
}

export type ReplayFn = (startSeq: number) => Promise<ReplayResult>;

export async function requestReplay(
  endpoint: string,
  startSeq: number,
  opts: ReplayOptions,
): Promise<ReplayResult> {
  // A fresh socket per request: a late answer to an earlier, timed-out request can then never
  // be mistaken for this one.
  const batches: ReplayedBatch[] = [];
  if (opts.signal?.aborted) return { ok: false, reason: "socket", batches };
  // sendTimeout bounds the request too: without it, send waits forever for an absent peer.
  const dealer = new Dealer({ linger: 0, sendTimeout: opts.timeoutMs });
  const deadline = Date.now() + opts.timeoutMs;
  const abort = (): void => dealer.close();
  opts.signal?.addEventListener("abort", abort, { once: true });
  try {
    dealer.connect(endpoint);
    await dealer.send([Buffer.alloc(0), encodeSeq(startSeq)]);
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) return { ok: false, reason: "timeout", batches };
      dealer.receiveTimeout = remaining;
      let frames: Buffer[];
      try {
        frames = await dealer.receive();
      } catch (err) {
        const code = (err as { code?: string }).code;
        return { ok: false, reason: code === "EAGAIN" ? "timeout" : "socket", batches };
      }
      const parsed = parseReplayFrames(frames);
      if (!parsed.ok) return { ok: false, reason: "malformed", batches };
      if (parsed.value.kind === "end") return { ok: true, batches };
      const { seq, topic, payload } = parsed.value;
      batches.push({ seq, topic, payload });
      if (batches.length > opts.maxBatches) return { ok: false, reason: "too_many", batches };
    }
  } catch {
    return { ok: false, reason: "socket", batches };
  } finally {
    opts.signal?.removeEventListener("abort", abort);
    if (!dealer.closed) dealer.close();
  }
}
