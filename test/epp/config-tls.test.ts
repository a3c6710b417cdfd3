// The `epp` section: defaults, clear errors that name the field, and TLS — a picker configured
// with a certificate serves health and ext_proc over TLS only, to a client that trusts it.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { credentials, loadPackageDefinition } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../control-plane/src/config/load-config.ts";
import { ServingStatus } from "../../control-plane/src/epp/messages.ts";
import { protoDefinitions } from "../../control-plane/src/epp/protos.ts";
import { type EppStack, startEppStack } from "./stack.ts";

const pool = { name: "p", models: ["m"], endpoints: [{ address: "10.0.0.1:8000", ranks: [0] }] };
const parse = (epp: unknown) => parseConfig({ pools: [pool], epp }, "t", {});

let dir = "";
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvroute-epp-tls-"));
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=DNS:localhost,IP:127.0.0.1",
      "-keyout",
      join(dir, "key.pem"),
      "-out",
      join(dir, "cert.pem"),
    ],
    { stdio: "ignore" },
  );
});
afterAll(() => {
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

describe("epp configuration", () => {
  it("defaults: port 9002, full-duplex bodies, 3 fallbacks, no TLS; absent = off", () => {
    expect(parse({})).toMatchObject({
      epp: {
        listen: "0.0.0.0:9002",
        requestBodyMode: "FULL_DUPLEX_STREAMED",
        responseBodyMode: "FULL_DUPLEX_STREAMED",
        destinationFallbacks: 3,
      },
    });
    expect(parse({}).epp?.tls).toBeUndefined();
    expect(parseConfig({ pools: [pool] }, "t", {}).epp).toBeUndefined();
  });

  it("errors name the field", () => {
    for (const [epp, field] of [
      [{ listen: "9002" }, "epp.listen"],
      [{ listen: "0.0.0.0:65536" }, "epp.listen"],
      [{ lisen: "0.0.0.0:9002" }, "epp"],
      [{ requestBodyMode: "STREAMED" }, "epp.requestBodyMode"],
      [{ destinationFallbacks: 8 }, "epp.destinationFallbacks"],
      [{ tls: { certFile: join(dir, "cert.pem") } }, "epp.tls.keyFile"],
      [{ tls: { certFile: join(dir, "nope.pem"), keyFile: join(dir, "key.pem") } }, "epp.tls.certFile"],
    ] as const)
      expect(() => parse(epp), JSON.stringify(epp)).toThrow(field);
  });
});

describe("TLS", () => {
  let s: EppStack;
  beforeAll(async () => {
    s = await startEppStack({
      engines: [[0]],
      epp: { tls: { certFile: join(dir, "cert.pem"), keyFile: join(dir, "key.pem") } },
    });
  }, 60_000);
  afterAll(async () => s?.close());

  // biome-ignore lint/suspicious/noExplicitAny: generated client
  const Health = (loadPackageDefinition(protoDefinitions) as any).grpc.health.v1.Health;
  const check = (creds: ReturnType<typeof credentials.createInsecure>) =>
    new Promise<{ status?: number; code?: number }>((resolve) => {
      const c = new Health(s.cp.epp?.address.replace("127.0.0.1", "localhost"), creds);
      c.Check(
        { service: "liveness" },
        { deadline: Date.now() + 5000 },
        (err: { code: number } | null, r: { status: number }) => {
          c.close();
          resolve(err === null ? { status: r.status } : { code: err.code });
        },
      );
    });

  it("answers a client that trusts the certificate, and nobody in plaintext or without that trust", async () => {
    const ca = readFileSync(join(dir, "cert.pem"));
    expect(await check(credentials.createSsl(ca))).toEqual({ status: ServingStatus.SERVING });
    expect((await check(credentials.createInsecure())).code).toBeDefined();
    expect((await check(credentials.createSsl())).code).toBeDefined();
  });
});
