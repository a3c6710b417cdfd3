// The simulator over real loopback HTTP with the real Qwen3 / Llama-3.1 tokenizers.
import { request } from "node:http";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { SimTokenizer } from "../../control-plane/sim/tokenize.ts";
import { LLAMA31, post, QWEN3, simConfig, withSim } from "./helpers.ts";

const LONG = "You are a meticulous assistant for the kvroute project. ".repeat(12);

describe("OpenAI API on one internal-LB server with 2 ranks", () => {
  it("same prompt twice → cached tokens on the same rank, none on the other", async () => {
    await withSim(simConfig(), async (sim) => {
      const port = sim.ports[0] as number;
      const body = { model: "qwen3", prompt: LONG, max_tokens: 4 };
      const first = await post(port, "/v1/completions", body, { "x-data-parallel-rank": "0" });
      expect(first.status).toBe(200);
      expect(first.headers.get("x-kvroute-sim-rank")).toBe("0");
      // vLLM leaves the details unset when nothing came from the cache: null in a full response.
      expect(first.json.usage).toHaveProperty("prompt_tokens_details", null);
      const promptTokens = first.json.usage.prompt_tokens as number;
      const second = await post(port, "/v1/completions", body, { "x-data-parallel-rank": "0" });
      const cached = Number(second.headers.get("x-kvroute-sim-cached-tokens"));
      expect(cached).toBe(Math.floor((promptTokens - 1) / 16) * 16);
      expect(second.json.usage.prompt_tokens_details.cached_tokens).toBe(cached);
      expect(second.json.choices[0].text).toBe(first.json.choices[0].text);
      const other = await post(port, "/v1/completions", body, { "x-data-parallel-rank": "1" });
      expect(other.headers.get("x-kvroute-sim-rank")).toBe("1");
      expect(other.json.usage.prompt_tokens_details).toBeNull();
    });
  });

  it("cache_salt and LoRA adapters separate cache entries, as in vLLM's block hashes", async () => {
    await withSim(simConfig({ loraNames: ["adapter-a"] }), async (sim) => {
      const port = sim.ports[0] as number;
      const pin = { "x-data-parallel-rank": "0" };
      const cached = async (b: Record<string, unknown>) =>
        Number(
          (await post(port, "/v1/completions", { prompt: LONG, max_tokens: 1, ...b }, pin)).headers.get(
            "x-kvroute-sim-cached-tokens",
          ),
        );
      expect(await cached({})).toBe(0);
      expect(await cached({})).toBeGreaterThan(0);
      expect(await cached({ cache_salt: "tenant-1" })).toBe(0);
      expect(await cached({ cache_salt: "tenant-1" })).toBeGreaterThan(0);
      expect(await cached({ model: "adapter-a" })).toBe(0);
      expect(await cached({ model: "adapter-a" })).toBeGreaterThan(0);
      const models = await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json();
      expect(models.data.map((m: { id: string }) => m.id)).toEqual(["qwen3", "adapter-a"]);
    });
  });

  it("the official openai client: chat, streaming with include_usage, completions", async () => {
    await withSim(simConfig(), async (sim) => {
      const client = new OpenAI({ baseURL: `http://127.0.0.1:${sim.ports[0]}/v1`, apiKey: "none" });
      const messages = [
        { role: "system" as const, content: LONG },
        { role: "user" as const, content: "Say something." },
      ];
      const pin = { headers: { "x-data-parallel-rank": "0" } };
      const chat = await client.chat.completions.create({ model: "qwen3", messages, max_tokens: 6 }, pin);
      expect(chat.object).toBe("chat.completion");
      expect(chat.choices[0]?.finish_reason).toBe("length");
      expect(chat.usage?.completion_tokens).toBe(6);
      // Token count = the real template rendered and encoded without extra special tokens.
      const tok = SimTokenizer.load(QWEN3);
      expect(chat.usage?.prompt_tokens).toBe(tok.encodeChat(messages).length);

      const stream = await client.chat.completions.create(
        { model: "qwen3", messages, max_tokens: 5, stream: true, stream_options: { include_usage: true } },
        pin,
      );
      let text = "";
      let usage: OpenAI.CompletionUsage | null | undefined;
      let finish: string | null | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? "";
        finish ??= chunk.choices[0]?.finish_reason;
        if (chunk.usage) usage = chunk.usage;
      }
      expect(finish).toBe("length");
      expect(text).toBe(chat.choices[0]?.message.content?.slice(0, text.length));
      expect(usage?.completion_tokens).toBe(5);
      expect(usage?.prompt_tokens_details?.cached_tokens).toBeGreaterThan(0);

      const comp = await client.completions.create({ model: "qwen3", prompt: "Hello", max_tokens: 3 });
      expect(comp.choices[0]?.text.length).toBeGreaterThan(0);
      await expect(client.completions.create({ model: "nope", prompt: "x" })).rejects.toMatchObject({
        status: 404,
      });
    });
  });

  it("raw SSE: chunks, [DONE], and no usage chunk unless asked", async () => {
    await withSim(simConfig(), async (sim) => {
      const r = await post(sim.ports[0] as number, "/v1/completions", {
        prompt: "Hi",
        max_tokens: 3,
        stream: true,
      });
      expect(r.headers.get("content-type")).toMatch(/^text\/event-stream/);
      const events = r.text.split("\n\n").filter(Boolean);
      expect(events.at(-1)).toBe("data: [DONE]");
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
      expect(chunks).toHaveLength(3);
      expect(chunks.every((c) => c.object === "text_completion" && !("usage" in c))).toBe(true);
      expect(chunks[2].choices[0].finish_reason).toBe("length");
      const u = await post(sim.ports[0] as number, "/v1/chat/completions", {
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 2,
        stream: true,
        stream_options: { include_usage: true },
      });
      const parts = u.text.split("\n\n").filter(Boolean);
      expect(parts.at(-1)).toBe("data: [DONE]");
      const cs = parts.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
      expect(cs[0].choices[0].delta).toEqual({ role: "assistant", content: "" });
      expect(cs.slice(0, -1).every((c) => !("usage" in c))).toBe(true); // vLLM: exclude_unset
      expect(cs.at(-1)).toMatchObject({
        object: "chat.completion.chunk",
        choices: [],
        usage: { completion_tokens: 2 },
      });
      // Nothing cached yet: the final usage has no details at all (exclude_none), not null.
      expect(cs.at(-1).usage).not.toHaveProperty("prompt_tokens_details");
    });
  });

  it("streams prompt-token details like vLLM: only in the final usage chunk, only when some were cached", async () => {
    await withSim(simConfig(), async (sim) => {
      const port = sim.ports[0] as number;
      const pin = { "x-data-parallel-rank": "0" };
      const body = {
        prompt: LONG,
        max_tokens: 3,
        stream: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      };
      const events = async () => {
        const r = await post(port, "/v1/completions", body, pin);
        const parts = r.text.split("\n\n").filter(Boolean);
        expect(parts.at(-1)).toBe("data: [DONE]");
        return parts.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
      };
      const cold = await events();
      expect(cold.every((c) => c.usage && !("prompt_tokens_details" in c.usage))).toBe(true);
      const warm = await events();
      const final = warm.at(-1);
      expect(final.choices).toEqual([]);
      const promptTokens = final.usage.prompt_tokens as number;
      expect(final.usage.prompt_tokens_details).toEqual({
        cached_tokens: Math.floor((promptTokens - 1) / 16) * 16,
      });
      // The continuous-usage chunks before it carry the counts only.
      expect(warm.slice(0, -1).every((c) => c.usage && !("prompt_tokens_details" in c.usage))).toBe(true);
    });
  });

  it("omits the details entirely without --enable-prompt-tokens-details", async () => {
    await withSim(simConfig({ promptTokensDetails: false }), async (sim) => {
      const port = sim.ports[0] as number;
      const pin = { "x-data-parallel-rank": "0" };
      const body = { model: "qwen3", prompt: LONG, max_tokens: 2 };
      await post(port, "/v1/completions", body, pin);
      const again = await post(port, "/v1/completions", body, pin);
      expect(Number(again.headers.get("x-kvroute-sim-cached-tokens"))).toBeGreaterThan(0);
      expect(again.json.usage.prompt_tokens_details).toBeNull();
    });
  });

  it("rank headers behave like vLLM: lenient int(), garbage ignored, out of range → 400", async () => {
    await withSim(simConfig(), async (sim) => {
      const port = sim.ports[0] as number;
      const b = { prompt: "Hi", max_tokens: 1 };
      for (const [v, rank] of [
        [" 1 ", "1"],
        ["+1", "1"],
        ["0_1", "1"],
        ["0", "0"],
      ]) {
        const r = await post(port, "/v1/completions", b, { "X-Data-Parallel-Rank": v as string });
        expect(r.status).toBe(200);
        expect(r.headers.get("x-kvroute-sim-rank")).toBe(rank);
      }
      // A repeated header: the first value counts (Starlette's headers.get).
      const twice = await new Promise<string | undefined>((resolve, reject) => {
        const r = request(
          {
            host: "127.0.0.1",
            port,
            path: "/v1/completions",
            method: "POST",
            headers: { "content-type": "application/json", "x-data-parallel-rank": ["1", "0"] },
          },
          (res) => {
            res.resume();
            resolve(res.headers["x-kvroute-sim-rank"] as string | undefined);
          },
        );
        r.on("error", reject);
        r.end(JSON.stringify(b));
      });
      expect(twice).toBe("1");
      const ignored = await post(port, "/v1/completions", b, { "x-data-parallel-rank": "one" });
      expect(ignored.status).toBe(200);
      for (const v of ["2", "-1", "1_000"]) {
        const r = await post(port, "/v1/completions", b, { "x-data-parallel-rank": v });
        expect(r.status).toBe(400);
        expect(r.json).toEqual({
          error: {
            message: `data_parallel_rank ${Number(v.replace("_", ""))} is out of range [0, 2).`,
            type: "BadRequestError",
            param: null,
            code: 400,
          },
        });
      }
    });
  });

  it("invalid requests get vLLM-shaped errors", async () => {
    await withSim(simConfig(), async (sim) => {
      const port = sim.ports[0] as number;
      const bad = await fetch(`http://127.0.0.1:${port}/v1/completions`, { method: "POST", body: "{" });
      expect(bad.status).toBe(400);
      expect((await bad.json()).error.type).toBe("BadRequestError");
      expect((await post(port, "/v1/chat/completions", { messages: [] })).status).toBe(400);
      const long = await post(port, "/v1/completions", { prompt: "x", max_tokens: 5000 });
      expect(long.status).toBe(400);
      expect(long.json.error.message).toMatch(/maximum context length is 4096 tokens/);
      expect(
        (await post(port, "/v1/completions", { prompt: "x", stream_options: { include_usage: true } }))
          .status,
      ).toBe(400);
      expect((await fetch(`http://127.0.0.1:${port}/nope`)).status).toBe(404);
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
      const models = await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json();
      expect(models.data[0]).toMatchObject({
        id: "qwen3",
        object: "model",
        owned_by: "vllm",
        max_model_len: 4096,
      });
    });
  });

  it("without a header vLLM's balancer spreads concurrent requests", async () => {
    await withSim(
      simConfig({
        latency: { stepOverheadMs: 20, prefillPerTokenMs: 0.01, decodePerSeqMs: 0.01 },
        // No coordinator refresh during the burst: the spread comes from the balancer's own
        // counting, as between two refreshes in vLLM. With refreshes (every ~1 ms at this time
        // scale) the split depended on how the requests interleaved with finishing ones.
        statsIntervalMs: 0,
      }),
      async (sim) => {
        const port = sim.ports[0] as number;
        const rs = await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            post(port, "/v1/completions", { prompt: `q${i}`, max_tokens: 8 }),
          ),
        );
        const ranks = rs.map((r) => r.headers.get("x-kvroute-sim-rank"));
        expect(ranks.filter((r) => r === "0").length).toBe(4);
        expect(ranks.filter((r) => r === "1").length).toBe(4);
      },
    );
  });
});

describe("real tokenization", () => {
  it("Llama-3.1: completions add <|begin_of_text|>; chat relies on the template's BOS only", async () => {
    const tok = SimTokenizer.load(LLAMA31);
    expect(tok.encodeCompletion("Hello")[0]).toBe(128000);
    const chatIds = tok.encodeChat([{ role: "user", content: "Hello" }]);
    expect(chatIds[0]).toBe(128000);
    expect(chatIds[1]).not.toBe(128000);
    await withSim(simConfig({ tokenizerDir: LLAMA31, model: "llama" }), async (sim) => {
      const r = await post(sim.ports[0] as number, "/v1/chat/completions", {
        messages: [{ role: "user", content: "Hello" }],
        max_tokens: 2,
      });
      expect(r.json.usage.prompt_tokens).toBe(chatIds.length);
    });
  });
});

describe("render and tokenize routes", () => {
  it("return the token ids the engine would see", async () => {
    await withSim(simConfig({ tokenizerDir: LLAMA31, model: "llama" }), async (sim) => {
      const port = sim.ports[0] as number;
      const tok = SimTokenizer.load(LLAMA31);
      const messages = [{ role: "user", content: "Hello" }];
      const chat = await post(port, "/v1/chat/completions/render", { messages });
      expect(chat.json).toEqual({ model: "llama", token_ids: tok.encodeChat(messages), features: null });
      const comp = await post(port, "/v1/completions/render", { prompt: "Hello" });
      expect(comp.json.token_ids).toEqual(tok.encodeCompletion("Hello"));
      const t = await post(port, "/tokenize", { prompt: "Hello", add_special_tokens: false });
      expect(t.json).toMatchObject({ count: 1, tokens: tok.encodeRaw("Hello"), max_model_len: 4096 });
      const tm = await post(port, "/tokenize", { messages });
      expect(tm.json.tokens).toEqual(tok.encodeChat(messages));
    });
  });
});

describe("metrics carry vLLM's engine labels in each DP mode", () => {
  const enginesIn = (text: string) =>
    [...text.matchAll(/^vllm:num_requests_running\{engine="(\d+)",model_name="m"\} /gm)].map((m) => m[1]);

  it("internal LB: all ranks on one server", async () => {
    await withSim(
      simConfig({ model: "m", topology: { mode: "internal", size: 3, sizeLocal: 3, startRank: 0 } }),
      async (sim) => {
        expect(sim.ports).toHaveLength(1);
        await post(
          sim.ports[0] as number,
          "/v1/completions",
          { prompt: LONG, max_tokens: 1 },
          { "x-data-parallel-rank": "2" },
        );
        const text = await (await fetch(`http://127.0.0.1:${sim.ports[0]}/metrics`)).text();
        expect(enginesIn(text)).toEqual(["0", "1", "2"]);
        expect(text).toMatch(/^vllm:prefix_cache_queries_total\{engine="2",model_name="m"\} [1-9]\d*\.0$/m);
        expect(text).toMatch(/^vllm:prefix_cache_hits_total\{engine="2",model_name="m"\} 0\.0$/m);
        expect(text).toMatch(
          /^vllm:cache_config_info\{block_size="16",.*num_gpu_blocks="512",.*engine="1"\} 1\.0$/m,
        );
        expect(text).toContain("# TYPE vllm:kv_cache_usage_perc gauge");
      },
    );
  });

  it("hybrid LB: the local range, header = local index", async () => {
    await withSim(
      simConfig({ model: "m", topology: { mode: "hybrid", size: 4, sizeLocal: 2, startRank: 2 } }),
      async (sim) => {
        const port = sim.ports[0] as number;
        const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        expect(enginesIn(text)).toEqual(["2", "3"]);
        const r = await post(
          port,
          "/v1/completions",
          { prompt: "x", max_tokens: 1 },
          { "x-data-parallel-rank": "1" },
        );
        expect(r.headers.get("x-kvroute-sim-rank")).toBe("3");
        const bad = await post(
          port,
          "/v1/completions",
          { prompt: "x", max_tokens: 1 },
          { "x-data-parallel-rank": "2" },
        );
        expect(bad.json.error.message).toBe("data_parallel_rank 2 is out of range [0, 2).");
      },
    );
  });

  it("external LB: one server per rank, each with its own label; only header 0 passes", async () => {
    await withSim(
      simConfig({ model: "m", topology: { mode: "external", size: 2, sizeLocal: 2, startRank: 0 } }),
      async (sim) => {
        expect(sim.ports).toHaveLength(2);
        for (const [i, port] of sim.ports.entries()) {
          const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
          expect(enginesIn(text)).toEqual([String(i)]);
          const ok = await post(
            port,
            "/v1/completions",
            { prompt: "x", max_tokens: 1 },
            { "x-data-parallel-rank": "0" },
          );
          expect(ok.headers.get("x-kvroute-sim-rank")).toBe(String(i));
          const bad = await post(
            port,
            "/v1/completions",
            { prompt: "x", max_tokens: 1 },
            { "x-data-parallel-rank": "1" },
          );
          expect(bad.json.error.message).toBe("data_parallel_rank 1 is out of range [0, 1).");
        }
      },
    );
  });
});
