// What another gateway likely has queued at its own share of a pool's slots, unseen here.
//
// Gateways see each other's requests only through reports (every reportMs) and the engines'
// scrapes, and a scrape shows a request being prefilled as one more running sequence, not as the
// prefill work ahead of the next request. So at a slot of another gateway's share, the prefill
// work that gateway sent in the last few hundred milliseconds is mostly invisible. With gateways of
// like traffic each sends its share about what this gateway sends its own (the roster splits the
// pool evenly, and each keeps near-equal choices to its share), so by Little's law each has about
// as much unanswered prefill work per slot of its share as this gateway has per slot of its own:
// the mirror, in uncached prompt tokens. At a slot of another share the decider tops the queue its
// cost already prices there (the engine's waiting requests that are not this gateway's and other
// gateways' reported ones, QUEUED_TOKENS each) up to the mirror.
//
// The mirror counts the gateway's unanswered prompts whole (LocalQueue.gatewayPromptTokensAt), not
// aged by the prefill done on them (gatewayTokensAt): the cost it tops up prices the other
// gateways' queued requests whole too (QUEUED_TOKENS each), and an aged mirror under that let a
// gateway's requests into the other share's slots — development seeds 1–6, 2 gateways × 4 threads,
// TTFT p90 / p99 ms: rag@32 142 / 206 aged against 125 / 164 whole, multi-turn-pressure@24 128 /
// 200 against 125 / 149 (docs/operations.md "Queued prefill, aged").
//
// Measured on the quality bench (2 gateways × 4 threads, docs/operations.md "Each gateway's share
// of the slots"): comparing the mirror's requests with the slot's queued requests and pricing the
// difference at the mirror's average prompt instead gave back most of the gain on unshared
// prompts and RAG; counting only this gateway's requests its scrapes cannot show yet gave back
// more.
import { LocalQueue } from "./queued-work";

export class ShareMirror {
  /** Unanswered requests' uncached prompt tokens per slot of this gateway's share. */
  tokensPerSlot: f64 = 0;

  /** Reads the gateway's share: candidates `picks[i]` for i = home, home + parts, … below n. */
  read(local: LocalQueue, picks: StaticArray<i32>, n: i32, parts: i32, home: i32): void {
    let slots = 0;
    let tokens: f64 = 0;
    for (let i = home; i < n; i += parts) {
      tokens += local.gatewayPromptTokensAt(picks[i]);
      slots++;
    }
    this.tokensPerSlot = slots > 0 ? tokens / <f64>slots : 0;
  }

  /** Expected prefill tokens another gateway has queued at one of its slots beyond `priced`, the
   * tokens of others' queued requests the slot's cost already charges (queuedTokens without this
   * gateway's own). */
  unseenTokens(priced: f64): f64 {
    return this.tokensPerSlot > priced ? this.tokensPerSlot - priced : 0;
  }

  clear(): void {
    this.tokensPerSlot = 0;
  }
}
