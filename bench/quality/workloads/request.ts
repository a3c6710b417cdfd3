// A chat request as every party sees it: the gateway's JSON body (kvroute), json(messages)
// (GAIE), the joined contents (SGLang) and the rendered token ids (the engine).
import type { ChatMessage } from "../../../control-plane/src/tokens/render-chat-template.ts";
import { type BenchTokenizer, MODEL } from "../tokens.ts";
import type { BenchRequest } from "./types.ts";

const utf8 = new TextEncoder();

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
    tokens: tok.encodeRendered(tok.renderChat(messages)),
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
