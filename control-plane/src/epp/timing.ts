// Where the picker's own time goes, per request phase: its busy time — decoding the gateway's
// ext_proc messages and handling them, until the last answer of the request phase is written —
// split into the embedded filter's steps, re-streaming the body (building the
// StreamedBodyResponses and handing them to gRPC, their encoding included) and the rest (gRPC:
// protobuf decoding, grpc-js, the exchange itself); and the latency it adds once the request is
// in (the message that completes the body → the last answer). Waiting for the gateway's next
// message is not the picker's time and is not counted. A clock read per step: cheap enough to
// stay on; bench/epp.bench.ts prints the split.
export interface PhaseTiming {
  /** Busy time of the request phase, µs: decoding + handling of its messages. */
  ownUs: number;
  /** From the message that completes the request (or its headers) to the last answer, µs. */
  latencyUs: number;
  /** Protobuf decoding of the request phase's messages, µs (part of ownUs). */
  decodeUs: number;
  filterUs: number;
  restreamUs: number;
}

/** Decoding time of each decoded ProcessingRequest (protos.ts), read by the stream's handler. */
export const decodeTimes = new WeakMap<object, number>();

/** The last RECENT phases, for percentiles, and sums since the start. */
export class TimingStats {
  static readonly RECENT = 4096;
  readonly recent: number[] = [];
  readonly recentLatency: number[] = [];
  phases = 0;
  decodeUs = 0;
  filterUs = 0;
  restreamUs = 0;

  add(t: PhaseTiming): void {
    this.phases++;
    this.decodeUs += t.decodeUs;
    this.filterUs += t.filterUs;
    this.restreamUs += t.restreamUs;
    if (this.recent.length >= TimingStats.RECENT) {
      this.recent.shift();
      this.recentLatency.shift();
    }
    this.recent.push(t.ownUs);
    this.recentLatency.push(t.latencyUs);
  }
}

export const nowUs = (): number => performance.now() * 1000;
