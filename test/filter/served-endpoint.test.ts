// The filter reads the endpoint that served (Envoy's `upstream.address`, the host of the attempt
// that answered) in on_response_headers and moves the request's accounting there only when it is
// a slot the fallback list could have named. Here every served value is almost right — another
// port, a prefix, a suffix, the IPv4-mapped IPv6 spelling, a list, empty — and none may move the
// in-flight count or the finished report off the slot the filter chose, nor trap.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { headers } from "../../host/index.ts";
import { until } from "./harness.ts";
import {
  destination,
  finishedAtControlPlane,
  type ManualStack,
  startCompletion,
  startManualStack,
} from "./manual-stack.ts";

let s: ManualStack;
beforeAll(async () => {
  s = await startManualStack(1);
}, 60_000);
afterAll(async () => s?.close());

const counter = (name: string) => Number(s.host.counter(name) ?? 0);
const totalInflight = () => s.cp.slots.present().reduce((n, sl) => n + s.cp.load.get(sl.id).inflight, 0);

interface Status {
  recentDecisions: Array<{ requestId: string; slotKey: string | null }>;
}

describe("a served endpoint that is no slot the list could name", () => {
  it("changes nothing: in flight and the report stay on the chosen slot, and it is counted", async () => {
    const engine = s.engine.address;
    const [ip, port] = [engine.slice(0, engine.lastIndexOf(":")), engine.slice(engine.lastIndexOf(":") + 1)];
    const bogus = [
      `${ip}:${Number(port) + 1}`,
      `${ip}:${port}0`,
      `${ip}:${port.slice(0, -1)}`,
      `${engine} `,
      ` ${engine}`,
      `[::ffff:${ip}]:${port}`,
      `${engine},${engine}`,
      "",
    ];
    const unknownBefore = counter("kvroute.requests.served_unknown");
    let finished = await finishedAtControlPlane(s.cp);
    for (const served of bogus) {
      const requestId = randomUUID();
      const { stream, sink } = startCompletion(s.host, s.leader, `served ${requestId}`);
      const dest = destination(sink);
      expect(dest).toBe(engine);
      const rank = sink.of("reqHeaders")[0]?.headers.find(([k]) => k === "x-data-parallel-rank")?.[1];
      const chosen = s.cp.slots.present().find((sl) => sl.address === dest && String(sl.globalRank) === rank);
      if (chosen === undefined) throw new Error("no chosen slot");
      stream.info.upstreamAddress = served;
      stream.encodeHeaders(headers([[":status", "200"]]), false);
      await until(
        () => {
          s.round();
          return s.cp.load.get(chosen.id).inflight === 1;
        },
        `in flight on the chosen slot (served ${JSON.stringify(served)})`,
      );
      expect(totalInflight()).toBe(1);
      stream.encodeData(new Uint8Array(Buffer.from("{}")), true);
      await until(async () => {
        s.round();
        return (await finishedAtControlPlane(s.cp)) === finished + 1;
      }, "finished report");
      finished++;
      const st = (await (await fetch(`${s.cp.url}/v1/status`)).json()) as Status;
      expect(st.recentDecisions[0]?.slotKey, JSON.stringify(served)).toBe(chosen.key);
      await until(() => {
        s.round();
        return totalInflight() === 0;
      }, "in flight released");
    }
    // The empty value is an address nobody has too: every one of them is counted.
    expect(counter("kvroute.requests.served_unknown") - unknownBefore).toBe(bogus.length);
    expect(counter("kvroute.requests.served_elsewhere")).toBe(0);
  });

  it("the chosen endpoint itself is no move and no count", async () => {
    const before = counter("kvroute.requests.served_unknown");
    const { stream } = startCompletion(s.host, s.leader, `served self ${randomUUID()}`);
    stream.info.upstreamAddress = s.engine.address;
    stream.encodeHeaders(headers([[":status", "200"]]), true);
    expect(counter("kvroute.requests.served_unknown")).toBe(before);
    expect(counter("kvroute.requests.served_elsewhere")).toBe(0);
  });
});
