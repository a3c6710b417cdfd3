// A chat request as every party sees it: the gateway's JSON body (kvroute), json(messages)
// (GAIE), the joined contents (SGLang) and the rendered token ids (the engine).
import type { ChatMessage } from "../../../control-plane/src/tokens/render-chat-template.ts";
import { type BenchTokenizer, MODEL } from "../tokens.ts";
import type { BenchRequest } from "./types.ts";

const utf8 = new TextEncoder();

export function chatRequest(
  tok: BenchTokenizer,
  id: string,
  messages: ChatMessage[],
  maxTokens: number,
): BenchRequest {
  const messagesJson = JSON.stringify(messages);
  return {
    id,
    messages,
    maxTokens,
    tokens: tok.encodeRendered(tok.renderChat(messages)),
    body: utf8.encode(
      `{"model":${JSON.stringify(MODEL)},"messages":${messagesJson},"max_tokens":${maxTokens}}`,
    ),
    messagesJson,
    routingText: messages.map((m) => m.content).join("\n"),
  };
}
