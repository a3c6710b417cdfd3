// A replica message larger than the NATS server's max_payload travels as parts (wire-format §7)
// and is joined again by each receiver. NATS core pub/sub does not fragment (its JetStream object
// store does, but it stores the data in a stream; replicas deliberately keep nothing and wait on
// nothing), and the parts are a header and a slice, so this is written here.
//
// The receiver's side is bounded: at most `maxMessages` messages and `maxBytes` bytes are being
// joined at once (the oldest give way to a new one), a message none of whose parts came for
// `ttlMs` is dropped, and a part seen before — of a message being joined or recently joined — is
// ignored. Parts may come in any order. NATS core delivers one publisher's messages in order and
// a split message is published in one go, so in practice the parts come back to back; the rules
// are for a server or a peer that does otherwise, and a lost part costs one report, which the
// gateway's next report replaces anyway.
import { encodeMessagePart, type MessagePart, messagePartOverhead } from "./replica-codec.ts";

/** No replica message is larger: gateway reports are refused above 16 MiB (app.ts), slot tables are far smaller. */
export const MAX_MESSAGE_BYTES = 32 << 20;
/** The part index and count are u16. */
const MAX_PARTS = 0xffff;
/** How many recently joined messages a late duplicate part is recognised against. */
const RECENT_JOINED = 256;

const utf8 = new TextEncoder();

export interface SplitHeader {
  replica: string;
  epoch: bigint;
  messageId: number;
}

/**
 * The parts of `message`, each at most `maxPayload` bytes, or null when it cannot be split so
 * (larger than MAX_MESSAGE_BYTES, more than 65535 parts, or a max_payload smaller than a part's
 * header). Part i holds bytes [i·size, (i+1)·size) with size = ⌈length / count⌉, so the
 * receiver knows where every part goes from its index alone.
 */
export function splitMessage(message: Uint8Array, maxPayload: number, h: SplitHeader): Uint8Array[] | null {
  const room = maxPayload - messagePartOverhead(utf8.encode(h.replica).length);
  if (room < 1 || message.length > MAX_MESSAGE_BYTES) return null;
  const count = Math.max(1, Math.ceil(message.length / room));
  if (count > MAX_PARTS) return null;
  const size = Math.ceil(message.length / count);
  const parts: Uint8Array[] = [];
  for (let index = 0; index < count; index++) {
    const bytes = message.subarray(index * size, Math.min((index + 1) * size, message.length));
    parts.push(encodeMessagePart({ ...h, index, count, length: message.length, bytes }));
  }
  return parts;
}

export interface JoinLimits {
  /** Bytes of messages being joined at once (each counts its whole length from its first part). */
  maxBytes: number;
  /** Messages being joined at once. */
  maxMessages: number;
  /** A message none of whose parts came for this long is dropped. */
  ttlMs: number;
}

/** Generous for a handful of peers each relaying one report per report interval. */
export const DEFAULT_JOIN_LIMITS: JoinLimits = { maxBytes: 64 << 20, maxMessages: 64, ttlMs: 5000 };

/** Why a part or a message being joined was dropped (kvroute_replica_messages_dropped_total reasons). */
export type PartDropReason = "part_duplicate" | "parts_expired" | "parts_evicted" | "too_large" | "malformed";

export type PartOutcome = { joined: Uint8Array } | { joined: null; dropped: PartDropReason | null };

interface Joining {
  message: Uint8Array;
  count: number;
  have: Uint8Array;
  received: number;
  lastPartAt: number;
}

const PENDING: PartOutcome = { joined: null, dropped: null };

export class MessageJoiner {
  /** Messages being joined, oldest first (Map keeps insertion order). */
  readonly #joining = new Map<string, Joining>();
  /** Keys of messages joined lately, oldest first: their late duplicates are not a new message. */
  readonly #joined = new Set<string>();
  #bytes = 0;

  constructor(
    private readonly limits: JoinLimits,
    /** Counts what is dropped outside add()'s own answer (expired and evicted messages). */
    private readonly onDrop: (reason: PartDropReason) => void,
  ) {}

  /** Adds a part received on `subject`; the whole message once its last part is in. */
  add(subject: string, part: MessagePart, now: number): PartOutcome {
    this.expire(now);
    const key = `${subject}\n${part.replica}\n${part.epoch}\n${part.messageId}`;
    if (this.#joined.has(key)) return { joined: null, dropped: "part_duplicate" };
    const size = Math.ceil(part.length / part.count);
    const offset = part.index * size;
    let m = this.#joining.get(key);
    if (part.bytes.length !== Math.min(size, part.length - offset) || part.bytes.length === 0) {
      if (m !== undefined) this.#forget(key, m);
      return { joined: null, dropped: "malformed" };
    }
    if (m === undefined) {
      if (part.length > MAX_MESSAGE_BYTES || part.length > this.limits.maxBytes)
        return { joined: null, dropped: "too_large" };
      this.#makeRoom(part.length);
      m = {
        message: new Uint8Array(part.length),
        count: part.count,
        have: new Uint8Array(part.count),
        received: 0,
        lastPartAt: now,
      };
      this.#joining.set(key, m);
      this.#bytes += part.length;
    } else if (m.count !== part.count || m.message.length !== part.length) {
      // Parts of one message that disagree on its shape: none of it can be trusted.
      this.#forget(key, m);
      return { joined: null, dropped: "malformed" };
    }
    m.lastPartAt = now;
    if (m.have[part.index] === 1) return { joined: null, dropped: "part_duplicate" };
    m.have[part.index] = 1;
    m.message.set(part.bytes, offset);
    m.received++;
    if (m.received < m.count) return PENDING;
    this.#forget(key, m);
    this.#joined.add(key);
    if (this.#joined.size > RECENT_JOINED) this.#joined.delete(this.#joined.keys().next().value as string);
    return { joined: m.message };
  }

  /** Drops the messages whose parts stopped coming (also called on the exchange's timer). */
  expire(now: number): void {
    for (const [key, m] of this.#joining) {
      if (now - m.lastPartAt < this.limits.ttlMs) continue;
      this.#forget(key, m);
      this.onDrop("parts_expired");
    }
  }

  /** Messages being joined and the bytes they hold (status, tests). */
  get pending(): { messages: number; bytes: number } {
    return { messages: this.#joining.size, bytes: this.#bytes };
  }

  #makeRoom(bytes: number): void {
    for (const [key, m] of this.#joining) {
      if (this.#bytes + bytes <= this.limits.maxBytes && this.#joining.size < this.limits.maxMessages) return;
      this.#forget(key, m);
      this.onDrop("parts_evicted");
    }
  }

  #forget(key: string, m: Joining): void {
    this.#joining.delete(key);
    this.#bytes -= m.message.length;
  }
}
