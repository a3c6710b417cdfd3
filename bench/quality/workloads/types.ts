// What a workload hands the harness: requests (chat bodies with their exact token ids) and
// when they arrive; a closed-loop workload (multi-turn chat) also says what comes after a
// request finishes, since the next turn carries the answer the simulated model wrote.
import type { ChatMessage } from "../../../control-plane/src/tokens/render-chat-template.ts";

export interface BenchRequest {
  id: string;
  messages: ChatMessage[];
  maxTokens: number;
  /** Token ids of the rendered chat: what the engine computes (and caches). Shared between
   * requests of the same messages (request.ts memoises them), so never changed in place. */
  tokens: readonly number[];
  /** The /v1/chat/completions JSON body, as the gateway receives it. */
  body: Uint8Array;
  /** JSON of `messages`: what GAIE's approximate prefix scorer cuts into blocks. */
  messagesJson: string;
  /** Message contents joined: the text sgl-router's cache-aware policy matches. */
  routingText: string;
  /** The LoRA adapter the body's `model` names (the LoRA bench); absent: the base model. */
  lora?: string;
}

export interface Arrival {
  atMs: number;
  request: BenchRequest;
}

export interface WorkloadRun {
  arrivals: Arrival[];
  /** Closed loop: the request that follows `done` (null when its session ends). */
  followUp?(done: BenchRequest, outputIds: readonly number[], finishMs: number): Arrival | null;
}

export interface Workload {
  name: string;
  /** One line for the report: shape, counts, and how it was scaled. */
  describe: string;
  /** Offered request rates (requests/s) of the ladder. */
  qps: readonly number[];
  run(qps: number): WorkloadRun;
}
