// The bearer token is checked when the configuration loads, not first met in a request: an
// empty one (in the file or as an empty KVROUTE_AUTH_TOKEN, which would otherwise read as "no
// token" and leave /v1/sync and /v1/report open), a short one, or one with a byte an
// Authorization header would not carry unchanged stops the control plane from starting.
import { describe, expect, it } from "vitest";
import { ConfigError, parseConfig, parseConfigYaml } from "../../control-plane/src/config/load-config.ts";

const pools = [{ name: "p", models: ["m"], endpoints: [{ address: "127.0.0.1:8000", ranks: [0] }] }];
const GOOD = "Kv7-route.Token_2026~abc+/xyz==";

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

const SYNTAX = "authToken: use only A-Z a-z 0-9 - . _ ~ + / (then optional = padding)";
const SHORT = "authToken: use at least 16 characters";
const ENV_EMPTY = "KVROUTE_AUTH_TOKEN: set but empty (unset it to run without a token, only for local use)";

describe("authToken at configuration load", () => {
  it.each([
    { name: "empty", token: "", problems: [SHORT, SYNTAX] },
    { name: "15 characters", token: GOOD.slice(0, 15), problems: [SHORT] },
    { name: "a leading space", token: ` ${GOOD}`, problems: [SYNTAX] },
    { name: "a trailing space", token: `${GOOD} `, problems: [SYNTAX] },
    { name: "a trailing tab", token: `${GOOD}\t`, problems: [SYNTAX] },
    { name: "a space inside", token: "0123456789 abcdef", problems: [SYNTAX] },
    { name: "a NUL inside", token: "0123456789\0abcdef", problems: [SYNTAX] },
    { name: "a non-ASCII letter", token: "0123456789abcdéf", problems: [SYNTAX] },
    { name: "= before the end", token: "0123456789=abcdef", problems: [SYNTAX] },
    { name: "a comma", token: "0123456789,abcdef", problems: [SYNTAX] },
  ])("refuses a token with $name", ({ token, problems }) => {
    expect(problemsOf(() => parseConfig({ authToken: token, pools }, "t", {}))).toEqual(problems);
    // The same token from the environment: the same problems (an empty one has its own).
    const fromEnv = token === "" ? [ENV_EMPTY] : problems;
    expect(problemsOf(() => parseConfig({ pools }, "t", { KVROUTE_AUTH_TOKEN: token }))).toEqual(fromEnv);
  });

  it("refuses an empty authToken in the YAML file", () => {
    expect(
      problemsOf(() => parseConfigYaml(`authToken: ""\npools: ${JSON.stringify(pools)}\n`, "f", {})),
    ).toEqual([SHORT, SYNTAX]);
  });

  it("refuses KVROUTE_AUTH_TOKEN set but empty, even when the file has a token", () => {
    for (const raw of [{ pools }, { authToken: GOOD, pools }]) {
      expect(problemsOf(() => parseConfig(raw, "t", { KVROUTE_AUTH_TOKEN: "" }))).toEqual([ENV_EMPTY]);
    }
  });

  it("accepts a b64token of 16 characters or more, padding included, from the file or the environment", () => {
    expect(parseConfig({ authToken: GOOD, pools }, "t", {}).authToken).toBe(GOOD);
    expect(parseConfig({ pools }, "t", { KVROUTE_AUTH_TOKEN: "0123456789abcdef" }).authToken).toBe(
      "0123456789abcdef",
    );
    // Unset: no token, the endpoints are open (local use, docs/configuration.md).
    expect(parseConfig({ pools }, "t", {}).authToken).toBeUndefined();
  });
});
