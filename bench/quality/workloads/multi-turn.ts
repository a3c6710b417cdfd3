// Multi-turn chat with growing histories: conversations start as a Poisson process; each turn
// resends the whole history — the shared system prompt, every earlier question and every
// answer the simulated model actually wrote — plus a new question, after a think time once the
// previous answer finished (closed loop per conversation). The cacheable prefix of turn k is
// all of turn k-1 including its answer, but only on the rank that served it.

import type { OutputLengths } from "../../../control-plane/sim/output-lengths.ts";
import { Rng } from "../../../control-plane/sim/rng.ts";
import type { ChatMessage } from "../../../control-plane/src/tokens/render-chat-template.ts";
import { exponentialMs, pieceRng, poissonTimes, wordText } from "../text.ts";
import type { BenchTokenizer } from "../tokens.ts";
import { answerLength, describeAnswers } from "./output.ts";
import { chatRequest } from "./request.ts";
import type { Arrival, BenchRequest, Workload } from "./types.ts";

export interface MultiTurnOptions {
  conversations: number;
  turns: number;
  systemTokens: number;
  /** Question length is uniform in [min, max] tokens. */
  questionTokens: [number, number];
  outputTokens: number;
  /** Answer lengths (default: every answer exactly `outputTokens`). */
  output?: OutputLengths;
  /** A private document of this many tokens opens each conversation's first question (0: none):
   * the cache-pressure variant's way of giving every conversation its own large working set. */
  privateContextTokens?: number;
  thinkMs: number;
  qps: readonly number[];
  seed: number;
  name?: string;
  note?: string;
}

interface Turn {
  conversation: number;
  turn: number;
}

export function multiTurn(tok: BenchTokenizer, o: MultiTurnOptions): Workload {
  const system = wordText(pieceRng(o.seed, 21), o.systemTokens, tok.words);
  const question = (c: number, k: number): string => {
    const rng = pieceRng(o.seed, 22, c, k);
    const [lo, hi] = o.questionTokens;
    const q = wordText(rng, lo + rng.int(hi - lo + 1), tok.words);
    const doc = o.privateContextTokens ?? 0;
    return k === 0 && doc > 0 ? `${wordText(pieceRng(o.seed, 24, c), doc, tok.words)}\n\n${q}` : q;
  };
  const answer = (c: number, k: number) => answerLength(o.output, o.outputTokens, o.seed, 25, c, k);
  const first: BenchRequest[] = Array.from({ length: o.conversations }, (_, c) =>
    chatRequest(
      tok,
      `mt-${c}-0`,
      [
        { role: "system", content: system },
        { role: "user", content: question(c, 0) },
      ],
      answer(c, 0).tokens,
      answer(c, 0).cap,
    ),
  );
  return {
    name: o.name ?? "multi-turn-chat",
    describe:
      `multi-turn chat: ${o.conversations} conversations × ${o.turns} turns, shared system prompt ${o.systemTokens} tokens, ` +
      `${(o.privateContextTokens ?? 0) > 0 ? `a private ${o.privateContextTokens}-token document opening each conversation, ` : ""}` +
      `questions ${o.questionTokens[0]}–${o.questionTokens[1]} tokens, answers ${describeAnswers(o.output, o.outputTokens)} ` +
      `tokens (the simulated model's own words carried into the history), think time exp(mean ${o.thinkMs} ms); ` +
      `conversations start as Poisson at QPS / ${o.turns}${o.note === undefined ? "" : `; ${o.note}`}`,
    qps: o.qps,
    run(qps) {
      const starts = poissonTimes(new Rng(o.seed ^ Math.round(qps * 1000)), first.length, qps / o.turns);
      const turns = new Map<string, Turn>();
      const arrivals = first.map((request, c) => {
        turns.set(request.id, { conversation: c, turn: 0 });
        return { atMs: starts[c] as number, request };
      });
      return {
        arrivals,
        followUp(done, outputIds, finishMs): Arrival | null {
          const at = turns.get(done.id);
          if (at === undefined || at.turn + 1 >= o.turns) return null;
          const next = at.turn + 1;
          const messages: ChatMessage[] = [
            ...done.messages,
            { role: "assistant", content: tok.textOf(outputIds) },
            { role: "user", content: question(at.conversation, next) },
          ];
          const a = answer(at.conversation, next);
          const request = chatRequest(tok, `mt-${at.conversation}-${next}`, messages, a.tokens, a.cap);
          turns.set(request.id, { conversation: at.conversation, turn: next });
          const think = exponentialMs(pieceRng(o.seed, 23, at.conversation, next), 1000 / o.thinkMs);
          return { atMs: finishMs + think, request };
        },
      };
    },
  };
}
