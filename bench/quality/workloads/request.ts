// A chat request as every party sees it: the gateway's JSON body (kvroute), json(messages)
// (GAIE), the joined contents (SGLang) and the rendered token ids (the engine).
import type { ChatMessage } from "../../../control-plane/src/tokens/render-chat-template.ts";
import { type BenchTokenizer, MODEL } from "../tokens.ts";
import type { BenchRequest } from "./types.ts";

const utf8 = new TextEncoder();

/** Token ids of prompts already rendered, by their messages' JSON (which the body needs anyway).
 * Every router runs on the same requests, and a follow-up turn (agentic, multi-turn) is built
 * again in every run; rendering and encoding a 20k-token context each time was most of a run.
 * Dropped whole past MEMO_CHARS of keys, so memory stays bounded. */
const promptMemos = new WeakMap<BenchTokenizer, { prompts: Map<string, readonly number[]>; chars: number }>();
const MEMO_CHARS = 400_000_000;

function promptTokens(tok: BenchTokenizer, messages: ChatMessage[], messagesJson: string): readonly number[] {
  let memo = promptMemos.get(tok);
  if (memo === undefined) {
    memo = { prompts: new Map(), chars: 0 };
    promptMemos.set(tok, memo);
  }
  const known = memo.prompts.get(messagesJson);
  if (known !== undefined) return known;
  const tokens = tok.encodeRendered(tok.renderChat(messages));
  if (memo.chars + messagesJson.length > MEMO_CHARS) {
    memo.prompts.clear();
    memo.chars = 0;
  }
  memo.prompts.set(messagesJson, tokens);
  memo.chars += messagesJson.length;
  return tokens;
}

/** `maxTokens`: where the simulated model stops (its EOS); `capTokens`: the client's `max_tokens`
 * in the body (defaults to `maxTokens`), the only length a router can see. */
export function chatRequest(
  tok: BenchTokenizer,
  id: string,
  messages: ChatMessage[],
  maxTokens: number,
  capTokens: number = maxTokens,
  lora?: string,
): BenchRequest {
  const messagesJson = JSON.stringify(messages);
  return {
    id,
    messages,
    maxTokens,
    tokens: promptTokens(tok, messages, messagesJson),
    body: utf8.encode(
      `{"model":${JSON.stringify(lora ?? MODEL)},"messages":${messagesJson},"max_tokens":${capTokens}}`,
    ),
    messagesJson,
    routingText: messages.map((m) => m.content).join("\n"),
    ...(lora === undefined ? {} : { lora }),
  };
}

/** The same prompt sent again under another id and answer length (no re-rendering). */
export function resend(r: BenchRequest, id: string, maxTokens: number, capTokens: number): BenchRequest {
  return {
    ...r,
    id,
    maxTokens,
    body: utf8.encode(
      `{"model":${JSON.stringify(MODEL)},"messages":${r.messagesJson},"max_tokens":${capTokens}}`,
    ),
  };
}
