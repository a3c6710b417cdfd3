// The demo's workload: a few long shared system prompts and multi-turn chats that grow their
// history, the shape where KV-cache-aware routing pays (DESIGN §9 workloads, in miniature).

export interface DemoMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

const TOPICS = [
  "You are a support engineer for a cloud GPU provider. Answer with exact commands, explain every flag, and cite the relevant documentation section.",
  "You are a careful legal assistant. Summarise contracts clause by clause, flag unusual terms, and never give advice outside the jurisdiction named by the user.",
  "You are a data-engineering tutor. Explain streaming joins, watermarks and exactly-once delivery with small worked examples in SQL and Python.",
  "You are an SRE on call for an LLM inference fleet. Diagnose latency regressions from metrics, propose the smallest safe change, and list the rollback.",
];

function systemPrompt(i: number): string {
  const base = TOPICS[i % TOPICS.length] as string;
  // Long enough (≈ 1.5k tokens) that the prefix cache decides the time to first token.
  return `${base}\n\n${Array.from({ length: 24 }, (_, k) => `Guideline ${k + 1}: ${base}`).join("\n")}`;
}

/** Rounds of requests; each round can run concurrently, later rounds extend earlier chats. */
export function demoRounds(chatsPerTopic = 3, turns = 3): DemoMessage[][][] {
  const chats: DemoMessage[][] = [];
  for (let t = 0; t < TOPICS.length; t++) {
    for (let c = 0; c < chatsPerTopic; c++) chats.push([{ role: "system", content: systemPrompt(t) }]);
  }
  const rounds: DemoMessage[][][] = [];
  for (let turn = 0; turn < turns; turn++) {
    const round: DemoMessage[][] = [];
    chats.forEach((chat, i) => {
      if (turn > 0)
        chat.push({ role: "assistant", content: `Here is my answer to question ${turn} of chat ${i}.` });
      chat.push({
        role: "user",
        content: `Chat ${i}, question ${turn + 1}: what should I check first, and why?`,
      });
      round.push([...chat]);
    });
    rounds.push(round);
  }
  return rounds;
}
