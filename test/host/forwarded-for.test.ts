// The host decides who the client is the way Envoy's connection manager does (host/forwarded-for.ts
// names the Envoy sources): X-Forwarded-For unless use_remote_address, xff_num_trusted_hops.
import { describe, expect, it } from "vitest";
import { downstreamRemoteAddress, formatIpPort, lastAddressFromXff } from "../../host/forwarded-for.ts";
import { HeaderMap } from "../../host/header-map.ts";

const PEER = { address: "192.0.2.7", port: 40000 };
const LOOPBACK_PEER = { address: "127.0.0.1", port: 40001 };
const LOCAL = { address: "127.0.0.1", port: 10000 };

function decide(xff: string[], useRemoteAddress: boolean, xffNumTrustedHops: number, peer = PEER) {
  const h = new HeaderMap(xff.map((v) => ["X-Forwarded-For", v] as [string, string]));
  const remote = downstreamRemoteAddress(h, peer, LOCAL, { useRemoteAddress, xffNumTrustedHops });
  return { source: formatIpPort(remote.address, remote.port), xff: h.getAll("x-forwarded-for") };
}

describe("getLastAddressFromXFF", () => {
  it.each([
    // [header, entries skipped from the end, address or null]
    ["10.0.0.1", 0, "10.0.0.1"],
    ["10.0.0.1, 10.0.0.2", 0, "10.0.0.2"],
    ["10.0.0.1,10.0.0.2 ", 1, "10.0.0.1"],
    ["10.0.0.1", 1, null],
    ["10.0.0.1,", 0, null],
    ["not-an-ip", 0, null],
    ["10.0.0.1:8080", 0, null],
    ["010.0.0.1", 0, null],
    ["2001:DB8::1", 0, "2001:db8::1"],
    ["fe80::1%eth0", 0, null],
    ["::ffff:10.0.0.1", 0, "::ffff:10.0.0.1"],
  ] as const)("%j skipping %i → %s", (xff, skip, want) => {
    expect(lastAddressFromXff(xff, skip)).toBe(want);
  });
});

describe("the downstream remote address (source.address)", () => {
  it("use_remote_address false (Envoy's default): the last X-Forwarded-For entry a client wrote", () => {
    expect(decide([], false, 0)).toEqual({ source: "192.0.2.7:40000", xff: [] });
    expect(decide(["10.1.2.3"], false, 0)).toEqual({ source: "10.1.2.3:0", xff: ["10.1.2.3"] });
    // Repeated copies are one inline header joined with ",": the last copy's last entry counts.
    expect(decide(["203.0.113.9", "10.1.2.3"], false, 0).source).toBe("10.1.2.3:0");
    expect(decide(["10.1.2.3, 203.0.113.9"], false, 1).source).toBe("10.1.2.3:0");
    expect(decide(["10.1.2.3"], false, 1).source).toBe("192.0.2.7:40000");
    expect(decide(["junk"], false, 0).source).toBe("192.0.2.7:40000");
    expect(decide(["2001:db8::5"], false, 0).source).toBe("[2001:db8::5]:0");
  });

  it("use_remote_address true: the peer, whatever the client wrote, appended to the header", () => {
    expect(decide(["10.1.2.3"], true, 0)).toEqual({ source: "192.0.2.7:40000", xff: ["10.1.2.3,192.0.2.7"] });
    expect(decide([], true, 0)).toEqual({ source: "192.0.2.7:40000", xff: ["192.0.2.7"] });
    // A loopback peer is recorded as Envoy's own address.
    expect(decide([], true, 0, LOOPBACK_PEER)).toEqual({ source: "127.0.0.1:40001", xff: ["127.0.0.1"] });
  });

  it("use_remote_address true with N trusted hops: the entry N − 1 from the end, before appending", () => {
    expect(decide(["10.1.2.3, 198.51.100.4"], true, 1).source).toBe("198.51.100.4:0");
    expect(decide(["10.1.2.3, 198.51.100.4"], true, 2).source).toBe("10.1.2.3:0");
    // Too few entries: the peer.
    expect(decide(["198.51.100.4"], true, 2).source).toBe("192.0.2.7:40000");
  });
});
