// A Kubernetes API server reduced to what discovery and the endpoint picker use: list and watch of
// pods, EndpointSlices, InferencePools, and llm-d.ai InferenceObjectives and InferenceModelRewrites
// in a namespace, filtered by an equality label selector, over plain HTTP on
// loopback. Watches stream JSON lines (chunked), replay events newer than the requested
// resourceVersion like the real server, and can be dropped, failed or sent 410 Gone.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";

export type Collection =
  | "pods"
  | "endpointslices"
  | "inferencepools"
  | "inferenceobjectives"
  | "inferencemodelrewrites";

interface Obj {
  metadata: {
    name: string;
    namespace: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    uid?: string;
    resourceVersion?: string;
  };
  [key: string]: unknown;
}

interface Watcher {
  coll: Collection;
  ns: string;
  selector: Record<string, string>;
  res: ServerResponse;
}

interface Event {
  rv: number;
  coll: Collection;
  type: "ADDED" | "MODIFIED" | "DELETED";
  object: Obj;
}

const ROUTES: Array<[RegExp, Collection]> = [
  [/^\/api\/v1\/namespaces\/([^/]+)\/pods$/, "pods"],
  [/^\/apis\/discovery\.k8s\.io\/v1\/namespaces\/([^/]+)\/endpointslices$/, "endpointslices"],
  [/^\/apis\/inference\.networking\.k8s\.io\/v1\/namespaces\/([^/]+)\/inferencepools$/, "inferencepools"],
  [/^\/apis\/llm-d\.ai\/v1alpha2\/namespaces\/([^/]+)\/inferenceobjectives$/, "inferenceobjectives"],
  [/^\/apis\/llm-d\.ai\/v1alpha2\/namespaces\/([^/]+)\/inferencemodelrewrites$/, "inferencemodelrewrites"],
];

function parseSelector(text: string | null): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (text ?? "").split(",").filter((p) => p !== "")) {
    const eq = part.indexOf("=");
    if (eq < 0) throw new Error(`unsupported selector ${part}`);
    out[part.slice(0, eq)] = part.slice(eq + 1);
  }
  return out;
}

function matches(obj: Obj, ns: string, selector: Record<string, string>): boolean {
  const labels = obj.metadata.labels ?? {};
  return obj.metadata.namespace === ns && Object.entries(selector).every(([k, v]) => labels[k] === v);
}

export class FakeApiServer {
  readonly #server: Server;
  readonly #objects: Record<Collection, Map<string, Obj>> = {
    pods: new Map(),
    endpointslices: new Map(),
    inferencepools: new Map(),
    inferenceobjectives: new Map(),
    inferencemodelrewrites: new Map(),
  };
  readonly #events: Event[] = [];
  readonly #watchers = new Set<Watcher>();
  #rv = 100;
  /** Every request answers 500 while set (an API server outage). */
  failing = false;
  /** Requests get no answer at all while set (a black-holed connection). */
  hanging = false;
  /** Only watch requests get no answer while set; lists still do. */
  hangingWatches = false;
  readonly requests = { list: 0, watch: 0, failed: 0, hung: 0 };
  url = "";

  constructor() {
    this.#server = createServer((req, res) => this.#handle(req, res));
  }

  async listen(): Promise<void> {
    await new Promise<void>((r) => this.#server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  kubeConfig(): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "fake", server: this.url, skipTLSVerify: true }],
      users: [{ name: "test", token: "fake-token" }],
      contexts: [{ name: "fake", cluster: "fake", user: "test" }],
      currentContext: "fake",
    });
    return kc;
  }

  get watchers(): number {
    return this.#watchers.size;
  }

  /** Creates or replaces an object and tells the watchers. */
  put(coll: Collection, obj: Obj): void {
    const type = this.#objects[coll].has(obj.metadata.name) ? "MODIFIED" : "ADDED";
    const stored = structuredClone(obj);
    stored.metadata.resourceVersion = String(++this.#rv);
    this.#objects[coll].set(obj.metadata.name, stored);
    this.#emit({ rv: this.#rv, coll, type, object: stored });
  }

  remove(coll: Collection, name: string): void {
    const obj = this.#objects[coll].get(name);
    if (obj === undefined) return;
    this.#objects[coll].delete(name);
    const gone = structuredClone(obj);
    gone.metadata.resourceVersion = String(++this.#rv);
    this.#emit({ rv: this.#rv, coll, type: "DELETED", object: gone });
  }

  /** Cuts every open watch connection (as a load balancer or API server restart does). */
  dropWatches(): void {
    for (const w of this.#watchers) w.res.destroy();
    this.#watchers.clear();
  }

  /** Ends every watch with an ERROR event 410 Gone (resourceVersion too old). */
  expireWatches(): void {
    for (const w of this.#watchers) {
      const status = {
        kind: "Status",
        apiVersion: "v1",
        status: "Failure",
        reason: "Expired",
        code: 410,
        message: "too old resource version",
      };
      w.res.end(`${JSON.stringify({ type: "ERROR", object: status })}\n`);
    }
    this.#watchers.clear();
  }

  async close(): Promise<void> {
    this.dropWatches();
    this.#server.closeAllConnections();
    await new Promise((r) => this.#server.close(r));
  }

  #emit(event: Event): void {
    this.#events.push(event);
    for (const w of this.#watchers) {
      if (w.coll === event.coll && matches(event.object, w.ns, w.selector)) this.#send(w.res, event);
    }
  }

  #send(res: ServerResponse, event: Event): void {
    res.write(`${JSON.stringify({ type: event.type, object: event.object })}\n`);
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://fake");
    const route = ROUTES.find(([re]) => re.test(url.pathname));
    if (req.method !== "GET" || route === undefined) {
      res.writeHead(404, { "content-type": "application/json" }).end('{"kind":"Status","code":404}');
      return;
    }
    const isWatch = url.searchParams.get("watch") === "true";
    if (this.hanging || (this.hangingWatches && isWatch)) {
      this.requests.hung++;
      return;
    }
    if (this.failing) {
      this.requests.failed++;
      res.writeHead(500, { "content-type": "application/json" }).end('{"kind":"Status","code":500}');
      return;
    }
    const [re, coll] = route;
    const ns = decodeURIComponent((re.exec(url.pathname) as RegExpExecArray)[1] as string);
    const selector = parseSelector(url.searchParams.get("labelSelector"));
    if (isWatch) {
      this.requests.watch++;
      res.writeHead(200, { "content-type": "application/json", "transfer-encoding": "chunked" });
      res.flushHeaders();
      const w: Watcher = { coll, ns, selector, res };
      // Changes made after the list the client watches from (resourceVersion) come first.
      const since = Number(url.searchParams.get("resourceVersion") ?? this.#rv);
      for (const e of this.#events) {
        if (e.rv > since && e.coll === coll && matches(e.object, ns, selector)) this.#send(res, e);
      }
      this.#watchers.add(w);
      res.on("close", () => this.#watchers.delete(w));
      return;
    }
    this.requests.list++;
    const items = [...this.#objects[coll].values()].filter((o) => matches(o, ns, selector));
    const kind = {
      pods: "PodList",
      endpointslices: "EndpointSliceList",
      inferencepools: "InferencePoolList",
      inferenceobjectives: "InferenceObjectiveList",
      inferencemodelrewrites: "InferenceModelRewriteList",
    }[coll];
    const apiVersion = {
      pods: "v1",
      endpointslices: "discovery.k8s.io/v1",
      inferencepools: "inference.networking.k8s.io/v1",
      inferenceobjectives: "llm-d.ai/v1alpha2",
      inferencemodelrewrites: "llm-d.ai/v1alpha2",
    }[coll];
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify({ kind, apiVersion, metadata: { resourceVersion: String(this.#rv) }, items }));
  }
}

/** A pod as the API returns it, with the fields discovery reads. */
export function pod(
  name: string,
  ip: string,
  labels: Record<string, string>,
  annotations: Record<string, string> = {},
  ns = "llm",
): Obj {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: ns, labels, annotations, uid: `uid-${name}` },
    status: { podIP: ip, phase: "Running" },
  };
}

/** An EndpointSlice of a Service listing pods with their readiness. */
export function endpointSlice(
  name: string,
  service: string,
  entries: Array<{ pod: string; ip: string; ready: boolean | undefined }>,
  ports: number[],
  ns = "llm",
): Obj {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name,
      namespace: ns,
      labels: {
        "kubernetes.io/service-name": service,
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
      },
    },
    addressType: "IPv4",
    endpoints: entries.map((e) => ({
      addresses: [e.ip],
      conditions: e.ready === undefined ? {} : { ready: e.ready, serving: e.ready, terminating: false },
      targetRef: { kind: "Pod", name: e.pod, namespace: ns, uid: `uid-${e.pod}` },
    })),
    ports: ports.map((port, i) => ({ name: `http-${i}`, port, protocol: "TCP" })),
  };
}
