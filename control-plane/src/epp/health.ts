// grpc.health.v1.Health for the services GAIE gateways and probes ask about (GAIE
// docs/proposals/004-endpoint-picker-protocol, "Health Checking"): "liveness" is SERVING while
// the process answers; "readiness", the ext_proc service name and "" (the server as a whole)
// are SERVING only once the embedded filter holds a routing cache from this control plane
// (NOT_SERVING before: a gateway must not send traffic the picker can only answer with 503).
// Check answers NOT_FOUND for other names (the protocol's rule); Watch sends SERVICE_UNKNOWN and
// keeps the stream open, and sends every change of status.
import { type ServerUnaryCall, type ServerWritableStream, type sendUnaryData, status } from "@grpc/grpc-js";
import { ServingStatus } from "./messages.ts";
import { EXT_PROC_SERVICE, MalformedMessage } from "./protos.ts";

type Request = { service?: string } | MalformedMessage;
type Response = { status: number };

export const LIVENESS = "liveness";
export const READINESS = "readiness";
const READY_SERVICES = new Set(["", READINESS, EXT_PROC_SERVICE]);

export class HealthService {
  private readonly watchers = new Set<{
    service: string;
    call: ServerWritableStream<Request, Response>;
    last: number;
  }>();
  private timer: NodeJS.Timeout;

  /** `ready` is polled (cheap: a shared-data read) every `pollMs` for watchers. */
  constructor(
    private readonly ready: () => boolean,
    pollMs = 200,
  ) {
    this.timer = setInterval(() => this.notify(), pollMs);
    this.timer.unref();
  }

  statusOf(service: string): number {
    if (service === LIVENESS) return ServingStatus.SERVING;
    if (READY_SERVICES.has(service)) return this.ready() ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
    return ServingStatus.SERVICE_UNKNOWN;
  }

  readonly handlers = {
    Check: (call: ServerUnaryCall<Request, Response>, callback: sendUnaryData<Response>) => {
      const req = call.request;
      if (req instanceof MalformedMessage)
        return callback({
          code: status.INVALID_ARGUMENT,
          details: `malformed HealthCheckRequest: ${req.reason}`,
        });
      const s = this.statusOf(req.service ?? "");
      if (s === ServingStatus.SERVICE_UNKNOWN)
        return callback({
          code: status.NOT_FOUND,
          details: `unknown service ${JSON.stringify(req.service ?? "")}`,
        });
      callback(null, { status: s });
    },
    Watch: (call: ServerWritableStream<Request, Response>) => {
      const req = call.request;
      if (req instanceof MalformedMessage) {
        call.emit("error", {
          code: status.INVALID_ARGUMENT,
          details: `malformed HealthCheckRequest: ${req.reason}`,
        });
        return;
      }
      const w = { service: req.service ?? "", call, last: -1 };
      this.watchers.add(w);
      const drop = () => this.watchers.delete(w);
      call.on("cancelled", drop);
      call.on("close", drop);
      call.on("error", drop);
      this.push(w);
    },
  };

  private push(w: { service: string; call: ServerWritableStream<Request, Response>; last: number }): void {
    const s = this.statusOf(w.service);
    if (s === w.last) return;
    w.last = s;
    w.call.write({ status: s });
  }

  private notify(): void {
    for (const w of this.watchers) this.push(w);
  }

  close(): void {
    clearInterval(this.timer);
    for (const w of this.watchers) w.call.end();
    this.watchers.clear();
  }
}
