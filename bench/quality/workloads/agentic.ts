// Agentic tool use, the traffic coding and research agents send: every call carries one of a
// few shared tool-schema blocks (5–20k tokens, the same bytes for every session using that
// agent), then the session's task, then the history so far. A session runs 5–20 steps; each
// step's answer is a short tool call, the tool's result (a few hundred to ~1.5k tokens) is
// appended and the next call follows after a short think time (the tool's latency), so a
// session's context grows step by step. Some sessions fan out into parallel lanes (sub-agents
// working on parts of the task): their first calls arrive together as a burst, share the
// session's whole prefix, and keep running side by side. Each lane is one closed loop (the
// harness takes one follow-up per finished call).

import type { OutputLengths } from "../../../control-plane/sim/output-lengths.ts";
import { Rng } from "../../../control-plane/sim/rng.ts";
import type { ChatMessage } from "../../../control-plane/src/tokens/render-chat-template.ts";
import { exponentialMs, pieceRng, poissonTimes, wordText } from "../text.ts";
import type { BenchTokenizer } from "../tokens.ts";
import { answerLength, describeAnswers } from "./output.ts";
import { chatRequest } from "./request.ts";
import type { Arrival, BenchRequest, Workload } from "./types.ts";

export interface AgenticOptions {
  sessions: number;
  /** Distinct agents (tool-schema blocks); sessions pick one uniformly. */
  toolsets: number;
  /** Tool-schema block length, uniform in [min, max] tokens. */
  toolSchemaTokens: [number, number];
  taskTokens: [number, number];
  /** Steps (calls) per lane, uniform in [min, max]. */
  steps: [number, number];
  /** Lanes per session and their probabilities (e.g. [[1, 0.6], [2, 0.25], [4, 0.15]]). */
  lanes: ReadonlyArray<readonly [number, number]>;
  toolResultTokens: [number, number];
  /** Mean answer (tool call) length; with `output`, the distribution of answers. */
  outputTokens: number;
  output?: OutputLengths;
  /** Mean think time between a call's answer and the next call (tool latency), ms. */
  thinkMs: number;
  qps: readonly number[];
  seed: number;
}

export const AGENTIC_DEFAULTS = {
  toolsets: 4,
  toolSchemaTokens: [5000, 20000] as [number, number],
  taskTokens: [200, 600] as [number, number],
  steps: [5, 20] as [number, number],
  lanes: [
    [1, 0.6],
    [2, 0.25],
    [4, 0.15],
  ] as ReadonlyArray<readonly [number, number]>,
  toolResultTokens: [100, 1500] as [number, number],
  outputTokens: 150,
  thinkMs: 300,
};

interface Lane {
  session: number;
  lane: number;
  step: number;
  steps: number;
}

const uniform = (rng: Rng, [lo, hi]: readonly [number, number]) => lo + rng.int(hi - lo + 1);

export function lanesOf(rng: Rng, choices: AgenticOptions["lanes"]): number {
  let u = rng.next();
  for (const [n, p] of choices) {
    if (u < p) return n;
    u -= p;
  }
  return (choices[choices.length - 1] as readonly [number, number])[0];
}

/** Expected calls per session: mean steps × mean lanes (sets the session start rate). */
export function callsPerSession(o: AgenticOptions): number {
  const lanes = o.lanes.reduce((s, [n, p]) => s + n * p, 0);
  return ((o.steps[0] + o.steps[1]) / 2) * lanes;
}

export function agentic(tok: BenchTokenizer, o: AgenticOptions): Workload {
  const schemas = Array.from({ length: o.toolsets }, (_, t) => {
    const rng = pieceRng(o.seed, 51, t);
    return `You can call these tools:\n\n${wordText(rng, uniform(rng, o.toolSchemaTokens), tok.words)}`;
  });
  const sessionRng = (s: number) => pieceRng(o.seed, 52, s);
  const firstCalls: Array<{ session: number; request: BenchRequest; lane: Lane }> = [];
  for (let s = 0; s < o.sessions; s++) {
    const rng = sessionRng(s);
    const toolset = rng.int(o.toolsets);
    const task = wordText(rng, uniform(rng, o.taskTokens), tok.words);
    const lanes = lanesOf(rng, o.lanes);
    for (let l = 0; l < lanes; l++) {
      const steps = uniform(pieceRng(o.seed, 53, s, l), o.steps);
      const user = lanes === 1 ? task : `${task}\n\nYour part: ${l + 1} of ${lanes}.`;
      const messages: ChatMessage[] = [
        { role: "system", content: schemas[toolset] as string },
        { role: "user", content: user },
      ];
      const a = answerLength(o.output, o.outputTokens, o.seed, 54, s, l, 0);
      firstCalls.push({
        session: s,
        request: chatRequest(tok, `ag-${s}-${l}-0`, messages, a.tokens, a.cap),
        lane: { session: s, lane: l, step: 0, steps },
      });
    }
  }
  return {
    name: "agentic-tool-use",
    describe:
      `agentic tool use: ${o.sessions} sessions over ${o.toolsets} shared tool-schema blocks of ` +
      `${o.toolSchemaTokens[0]}–${o.toolSchemaTokens[1]} tokens, task ${o.taskTokens[0]}–${o.taskTokens[1]} tokens, ` +
      `${o.steps[0]}–${o.steps[1]} steps per lane, lanes ${o.lanes.map(([n, p]) => `${n} (${Math.round(p * 100)}%)`).join(" / ")} ` +
      `starting together, tool calls ${describeAnswers(o.output, o.outputTokens)} tokens, tool results ` +
      `${o.toolResultTokens[0]}–${o.toolResultTokens[1]} tokens, think time exp(mean ${o.thinkMs} ms); sessions start ` +
      `as Poisson at QPS / ${callsPerSession(o).toFixed(1)} calls per session`,
    qps: o.qps,
    run(qps) {
      const starts = poissonTimes(
        new Rng(o.seed ^ Math.round(qps * 1000)),
        o.sessions,
        qps / callsPerSession(o),
      );
      const lanes = new Map<string, Lane>();
      const arrivals: Arrival[] = firstCalls.map((c) => {
        lanes.set(c.request.id, c.lane);
        return { atMs: starts[c.session] as number, request: c.request };
      });
      arrivals.sort((a, b) => a.atMs - b.atMs);
      return {
        arrivals,
        followUp(done, outputIds, finishMs): Arrival | null {
          const at = lanes.get(done.id);
          if (at === undefined || at.step + 1 >= at.steps) return null;
          const next = at.step + 1;
          const rng = pieceRng(o.seed, 55, at.session, at.lane, next);
          const result = wordText(rng, uniform(rng, o.toolResultTokens), tok.words);
          const messages: ChatMessage[] = [
            ...done.messages,
            { role: "assistant", content: tok.textOf(outputIds) },
            { role: "user", content: `Tool result:\n${result}` },
          ];
          const a = answerLength(o.output, o.outputTokens, o.seed, 54, at.session, at.lane, next);
          const request = chatRequest(tok, `ag-${at.session}-${at.lane}-${next}`, messages, a.tokens, a.cap);
          lanes.set(request.id, { ...at, step: next });
          const think = exponentialMs(rng, 1000 / o.thinkMs);
          return { atMs: finishMs + think, request };
        },
      };
    },
  };
}
