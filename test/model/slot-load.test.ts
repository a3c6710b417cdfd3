import { describe, expect, it } from "vitest";
import { LoadModel } from "../../control-plane/src/model/slot-load.ts";

describe("load model", () => {
  it("sums in-flight over gateways, replaces each gateway's picture and forgets silent gateways", () => {
    const load = new LoadModel(3);
    load.gatewayInflight("a", new Map([[0, 2]]), 0);
    load.gatewayInflight(
      "b",
      new Map([
        [0, 3],
        [1, 1],
      ]),
      0,
    );
    expect([load.get(0).inflight, load.get(1).inflight]).toEqual([5, 1]);
    load.gatewayInflight("b", new Map([[1, 4]]), 1000);
    expect([load.get(0).inflight, load.get(1).inflight]).toEqual([2, 4]);
    load.takeChanged();
    load.expireGateways(5000, 4500); // a (seen at 0) is silent; b (1000) is not
    expect([load.get(0).inflight, load.get(1).inflight]).toEqual([0, 4]);
    expect(load.takeChanged()).toBe(true);
  });

  it("lists the reporting gateways (kvr.gw) and says when one came or went", () => {
    const load = new LoadModel(3);
    expect(load.takeGatewaysChanged()).toBe(true); // the first publication carries a roster
    expect(load.takeGatewaysChanged()).toBe(false);
    load.gatewayInflight("zeta", new Map(), 0);
    load.gatewayInflight("alpha", new Map([[0, 1]]), 100);
    expect(load.takeGatewaysChanged()).toBe(true);
    expect(load.gateways()).toEqual(["alpha", "zeta"]);
    load.gatewayInflight("zeta", new Map([[1, 2]]), 2000); // a new report, no new gateway
    expect(load.takeGatewaysChanged()).toBe(false);
    load.expireGateways(5000, 4000); // alpha (seen at 100) is silent
    expect(load.takeGatewaysChanged()).toBe(true);
    expect(load.gateways()).toEqual(["zeta"]);
    load.expireGateways(5100, 4000);
    expect(load.takeGatewaysChanged()).toBe(false);
  });

  it("averages TTFT and counts failures towards unhealthy", () => {
    const load = new LoadModel(2);
    load.ttftObserved(0, 100);
    load.ttftObserved(0, 200);
    expect(load.get(0).ttftMs).toBeCloseTo(120);
    load.failed(0);
    expect(load.get(0).healthy).toBe(true);
    load.failed(0);
    expect(load.get(0).healthy).toBe(false);
    load.scraped(0, { running: 1, waiting: 0, kvUsage: 0.1 }, 10);
    expect(load.get(0)).toMatchObject({ healthy: true, consecutiveFailures: 0, running: 1 });
  });
});
