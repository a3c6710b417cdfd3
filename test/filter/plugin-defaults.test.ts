// The filter's plugin configuration left empty (`{}`) runs on the defaults docs/configuration.md
// "Filter plugin configuration (Envoy)" names: the control plane's cluster and authority, the
// sync and report paths, no bearer token, a report every `reportMs`. Read from the reference
// itself, so a default changed in filter/core/plugin-config.ts and not in the reference (or the
// other way round) fails here.
import { describe, expect, it } from "vitest";
import { documentedDefaults } from "../config/documented-defaults.ts";
import { manualHost, pollers, startFakeControlPlane } from "./fake-control-plane.ts";
import { until } from "./harness.ts";

const PLUGIN = documentedDefaults("## Filter plugin configuration (Envoy)");

/** The documented default of a plugin field, a quoted string unquoted. */
function documented(field: string): string {
  const text = PLUGIN.get(field);
  if (text === undefined) throw new Error(`docs/configuration.md documents no literal default for ${field}`);
  return text.replace(/^"(.*)"$/, "$1");
}

describe("the filter's plugin configuration defaults", () => {
  it("are the documented ones: cluster, authority, sync and report paths, no token, report period", async () => {
    const c = await startFakeControlPlane();
    const clock = { now: 5_000_000 };
    // Only the documented default cluster name leads to the control plane.
    const h = manualHost(c, () => clock.now, {
      pluginConfig: "{}",
      clusters: { [documented("controlPlane.cluster")]: c.address },
    });
    try {
      const round = () => {
        h.tick();
        clock.now += 100;
      };
      await until(() => {
        round();
        return c.polls.length > 0;
      }, "a sync long poll at the control plane");
      const poll = c.polls[0];
      expect(poll?.headers.host).toBe(documented("controlPlane.authority"));
      expect(poll?.headers.authorization).toBeUndefined();
      expect(documented("controlPlane.token")).toBe("");
      const leader = pollers(h)[0];
      expect([...(leader?.httpCalls.values() ?? [])].map((x) => x.path.split("?")[0])).toContain(
        documented("controlPlane.syncPath"),
      );
      // The leader's report goes to the documented report path (the fake control plane records
      // only what reaches /v1/report).
      expect(documented("controlPlane.reportPath")).toBe("/v1/report");
      await until(() => {
        round();
        return c.reports.length > 0;
      }, "a report at the control plane");
      // Then one report every reportMs of the host's clock: 5 s of rounds 100 ms apart, each one
      // settled (no report call left open) before the next.
      const reportMs = Number(documented("reportMs"));
      const reporting = () =>
        h
          .vms()
          .some((t) =>
            [...t.httpCalls.values()].some((x) => x.path.startsWith(documented("controlPlane.reportPath"))),
          );
      const before = c.reports.length;
      for (let i = 0; i < 50; i++) {
        round();
        await until(() => !reporting(), "the report answered");
      }
      expect(c.reports.length - before).toBe(5000 / reportMs);
    } finally {
      h.close();
      await c.close();
    }
  });
});
