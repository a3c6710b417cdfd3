// Every endpoint the control plane keeps behind the bearer token, against a real control
// plane on 127.0.0.1, with the requests that are almost right: a prefix or suffix of the
// token, another case, extra padding, whitespace where the token is, two Authorization
// fields, a NUL, a non-ASCII byte in the token's place. Each case is its own test, and a
// refused request must also have changed nothing (no gateway recorded, no report applied).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, startControlPlane } from "../../control-plane/src/app.ts";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { encodeReport, type FinishedRequest } from "../../control-plane/src/reports/report-codec.ts";
import { type RawResponse, rawRequest } from "./raw-http.ts";

// Mixed case, every punctuation mark a b64token allows, and one `=` of padding at the end.
const TOKEN = "Kv7-route.Token_2026~abc+/xyz=";
const UNPADDED = TOKEN.slice(0, -1);

type Outcome = "accepted" | "refused" | "bad request";
interface Case {
  name: string;
  /** Header lines as written on the wire (latin1: one char, one byte). */
  fields: string[];
  outcome: Outcome;
}

const auth = (value: string): string => `Authorization: ${value}`;
const bearer = (token: string): string[] => [auth(`Bearer ${token}`)];
const flipCase = (s: string): string =>
  [...s].map((c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())).join("");

const CASES: Case[] = [
  { name: "the token", fields: bearer(TOKEN), outcome: "accepted" },
  // RFC 9110 §11.1: the scheme is case-insensitive. The token never is.
  { name: "scheme in lower case", fields: [auth(`bearer ${TOKEN}`)], outcome: "accepted" },
  { name: "scheme in upper case", fields: [auth(`BEARER ${TOKEN}`)], outcome: "accepted" },
  // RFC 6750 §2.1: "Bearer" 1*SP b64token — a second space is still the same credentials.
  { name: "two spaces after the scheme", fields: [auth(`Bearer  ${TOKEN}`)], outcome: "accepted" },
  // RFC 9110 §5.5: whitespace around a field value is not part of it (the parser strips it).
  {
    name: "spaces and tabs around the field value",
    fields: [`Authorization: \t Bearer ${TOKEN} \t`],
    outcome: "accepted",
  },

  { name: "no Authorization field", fields: [], outcome: "refused" },
  { name: "an empty Authorization field", fields: ["Authorization:"], outcome: "refused" },
  { name: "the scheme alone", fields: [auth("Bearer")], outcome: "refused" },
  { name: "the token without a scheme", fields: [auth(TOKEN)], outcome: "refused" },
  { name: "another scheme (Basic)", fields: [auth(`Basic ${TOKEN}`)], outcome: "refused" },
  { name: "another scheme (Token)", fields: [auth(`Token ${TOKEN}`)], outcome: "refused" },
  { name: "a scheme that only starts with Bearer", fields: [auth(`Bearers ${TOKEN}`)], outcome: "refused" },
  { name: "no separator after the scheme", fields: [auth(`Bearer${TOKEN}`)], outcome: "refused" },
  { name: "a colon after the scheme", fields: [auth(`Bearer:${TOKEN}`)], outcome: "refused" },
  { name: "a tab after the scheme", fields: [auth(`Bearer\t${TOKEN}`)], outcome: "refused" },
  { name: "a space then a tab before the token", fields: [auth(`Bearer \t${TOKEN}`)], outcome: "refused" },
  {
    name: "the token minus its last byte (its = padding)",
    fields: bearer(TOKEN.slice(0, -1)),
    outcome: "refused",
  },
  { name: "the token minus its last two bytes", fields: bearer(TOKEN.slice(0, -2)), outcome: "refused" },
  { name: "the token minus its first byte", fields: bearer(TOKEN.slice(1)), outcome: "refused" },
  {
    name: "the first half of the token",
    fields: bearer(TOKEN.slice(0, TOKEN.length / 2)),
    outcome: "refused",
  },
  { name: "a single byte of the token", fields: bearer(TOKEN.slice(0, 1)), outcome: "refused" },
  { name: "no token after the scheme and a space", fields: [auth("Bearer ")], outcome: "refused" },
  { name: "the token plus a byte", fields: bearer(`${TOKEN}x`), outcome: "refused" },
  { name: "the token twice", fields: bearer(TOKEN + TOKEN), outcome: "refused" },
  { name: "the token with one more = of padding", fields: bearer(`${TOKEN}=`), outcome: "refused" },
  { name: "the token in upper case", fields: bearer(TOKEN.toUpperCase()), outcome: "refused" },
  { name: "the token in lower case", fields: bearer(TOKEN.toLowerCase()), outcome: "refused" },
  { name: "the token with every letter's case swapped", fields: bearer(flipCase(TOKEN)), outcome: "refused" },
  {
    name: "the token with its first letter's case swapped",
    fields: bearer(flipCase(TOKEN[0] as string) + TOKEN.slice(1)),
    outcome: "refused",
  },
  {
    name: "a tab before the token's last byte",
    fields: bearer(`${TOKEN.slice(0, -1)}\t${TOKEN.slice(-1)}`),
    outcome: "refused",
  },
  {
    name: "a space inside the token",
    fields: bearer(`${TOKEN.slice(0, 8)} ${TOKEN.slice(8)}`),
    outcome: "refused",
  },
  { name: "the token, a space and more", fields: bearer(`${TOKEN} x`), outcome: "refused" },
  {
    name: "the token then a second credential in the same field",
    fields: [auth(`Bearer ${TOKEN}, Basic YTpi`)],
    outcome: "refused",
  },
  // Same byte length as the token: a latin1 é for its last byte, UTF-8 é for its last two.
  {
    name: "a non-ASCII byte in place of the last one",
    fields: bearer(`${TOKEN.slice(0, -1)}\xe9`),
    outcome: "refused",
  },
  {
    name: "UTF-8 é in place of the last two bytes",
    fields: bearer(`${TOKEN.slice(0, -2)}\xc3\xa9`),
    outcome: "refused",
  },
  // Authorization is a singleton field; two are ambiguous whatever they say.
  {
    name: "two fields: the token, then a wrong one",
    fields: [...bearer(TOKEN), ...bearer(UNPADDED)],
    outcome: "refused",
  },
  {
    name: "two fields: a wrong one, then the token",
    fields: [...bearer(UNPADDED), ...bearer(TOKEN)],
    outcome: "refused",
  },
  { name: "two fields, both the token", fields: [...bearer(TOKEN), ...bearer(TOKEN)], outcome: "refused" },
  {
    name: "two fields, names in different case",
    fields: [...bearer(TOKEN), `authorization: Bearer ${TOKEN}`],
    outcome: "refused",
  },
  // Node's HTTP parser answers 400 itself: the request never reaches the check.
  {
    name: "a NUL inside the token",
    fields: bearer(`${TOKEN.slice(0, 8)}\0${TOKEN.slice(9)}`),
    outcome: "bad request",
  },
  { name: "the token followed by a NUL", fields: bearer(`${TOKEN}\0`), outcome: "bad request" },
];

let engine: Server;
let cp: ControlPlane;

beforeAll(async () => {
  engine = createServer((_req, res) => res.writeHead(200).end('vllm:num_requests_running{engine="0"} 0\n'));
  await new Promise<void>((r) => engine.listen(0, "127.0.0.1", r));
  const cfg = parseConfig(
    {
      authToken: TOKEN,
      pools: [
        {
          name: "p",
          models: ["m"],
          endpoints: [{ address: `127.0.0.1:${(engine.address() as AddressInfo).port}`, ranks: [0] }],
        },
      ],
      cache: { buckets: 64, ways: 4 },
      // Long enough never to answer an accepted poll by timing out: every poll below is
      // answered at once with a reset page (its epoch is not the control plane's).
      sync: { longPollMs: 120_000 },
    },
    "test",
    {},
  );
  cp = await startControlPlane(cfg, { listen: "127.0.0.1:0", logger: pino({ level: "silent" }) });
});

afterAll(async () => {
  await cp?.stop();
  engine?.closeAllConnections();
  await new Promise((r) => engine?.close(r));
});

// biome-ignore lint/suspicious/noExplicitAny: reads fields of the status document
const status = async (): Promise<any> => (await fetch(`${cp.url}/v1/status`)).json();

interface ProtectedEndpoint {
  name: string;
  /** Sends one request tagged with `id`, so its effect can be looked for afterwards. */
  send(fields: string[], id: string): Promise<RawResponse>;
  acceptedStatus: number;
  /** Whether the request tagged `id` changed the control plane's state. */
  tookEffect(id: string): Promise<boolean>;
}

const ENDPOINTS: ProtectedEndpoint[] = [
  {
    name: "GET /v1/sync",
    send: (fields, id) =>
      rawRequest(`${cp.url}/v1/sync?epoch=1&version=0`, "GET", [...fields, `X-Kvroute-Gateway: ${id}`]),
    acceptedStatus: 200,
    tookEffect: async (id) => (await status()).gateways.some((g: { id: string }) => g.id === id),
  },
  {
    name: "POST /v1/report",
    send: (fields, id) => {
      const finished: FinishedRequest = {
        slot: 0,
        status: 200,
        outcome: 1,
        promptBytes: 100,
        cachedBytes: 0,
        ttftMs: 10,
        durationMs: 20,
        requestId: id,
      };
      const report = encodeReport({
        gateway: id,
        inflight: new Map(),
        finished: [finished],
        speculative: [],
      });
      return rawRequest(`${cp.url}/v1/report`, "POST", fields, report);
    },
    acceptedStatus: 204,
    tookEffect: async (id) =>
      (await status()).recentDecisions.some((d: { requestId: string }) => d.requestId === id),
  },
];

const expectedStatus = (endpoint: ProtectedEndpoint, outcome: Outcome): number =>
  outcome === "accepted" ? endpoint.acceptedStatus : outcome === "refused" ? 401 : 400;

describe.each(ENDPOINTS)("$name behind the bearer token", (endpoint) => {
  it.each(CASES.map((c, i) => ({ ...c, id: `${endpoint.name.split("/").pop()}-${i}` })))(
    "$outcome: $name",
    async ({ fields, outcome, id }) => {
      const res = await endpoint.send(fields, id);
      expect(res.status).toBe(expectedStatus(endpoint, outcome));
      if (outcome === "refused") {
        expect(JSON.parse(res.body)).toEqual({
          error: { message: "missing or wrong bearer token", code: "unauthorized" },
        });
      }
      expect(await endpoint.tookEffect(id)).toBe(outcome === "accepted");
    },
  );
});

describe("what the token protects", () => {
  it("exactly the endpoints gateways call; the read-only ones stay open (docs/operations.md)", async () => {
    // Every route app.ts and the dashboard serve, without any Authorization field.
    const routes: Array<[string, string]> = [
      ["GET", "/v1/sync?epoch=1&version=0"],
      ["POST", "/v1/report"],
      ["GET", "/v1/status"],
      ["GET", "/metrics"],
      ["GET", "/healthz"],
      ["GET", "/readyz"],
      ["GET", "/"],
      ["GET", "/dashboard"],
      ["GET", "/dashboard/main.js"],
      ["GET", "/v1/events/status"],
    ];
    const refused: string[] = [];
    for (const [method, path] of routes) {
      const abort = new AbortController();
      const res = await fetch(cp.url + path, { method, signal: abort.signal });
      if (res.status === 401) {
        refused.push(`${method} ${path.split("?")[0]}`);
        // RFC 6750 §3: a 401 names the scheme it wants.
        expect(res.headers.get("www-authenticate")).toBe('Bearer realm="kvroute"');
      }
      abort.abort(); // the status stream never ends by itself
    }
    expect(refused).toEqual(["GET /v1/sync", "POST /v1/report"]);
  });
});
