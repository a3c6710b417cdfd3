// Envoy's shared queues (proxy-wasm-cpp-host src/shared_queue.cc + ContextBase in src/context.cc):
// a queue is keyed by (vm_id, name); its token is allocated once from a process-wide counter
// (never 0) and kept when the queue is registered again. Registering again re-targets delivery to
// the newest registrant (its thread and its root context — a stream context registers on behalf
// of its root) while preserving queued items. enqueue appends and asks the registrant's thread to
// call proxy_on_queue_ready(root, token) later (never inline). resolve with an empty vm_id means
// the caller's own vm_id; an unknown queue → NotFound. dequeue: unknown token → NotFound, no
// item → Empty.
import { WasmResult } from "./abi/constants.ts";

export interface QueueTarget {
  /** Posts a task to the registrant's thread (Envoy: Dispatcher::post on that worker). */
  post(task: () => void): void;
  /** Delivers on_queue_ready on that thread, to that root context, if it still exists. */
  deliver(contextId: number, token: number): void;
}

interface Queue {
  items: Uint8Array[];
  contextId: number;
  target: QueueTarget;
}

export class SharedQueues {
  private readonly tokens = new Map<string, number>();
  private readonly queues = new Map<number, Queue>();
  private nextToken = 1;
  /** Successful enqueues so far (each posts a task to the registrant's thread). */
  enqueued = 0;

  private static key(vmId: string, name: string): string {
    return `${vmId}\u0000${name}`;
  }

  register(vmId: string, name: string, rootContextId: number, target: QueueTarget): number {
    const key = SharedQueues.key(vmId, name);
    let token = this.tokens.get(key);
    if (token === undefined) {
      do {
        token = this.nextToken;
        this.nextToken = (this.nextToken + 1) >>> 0;
      } while (token === 0 || this.queues.has(token));
      this.tokens.set(key, token);
    }
    const q = this.queues.get(token);
    if (q === undefined) this.queues.set(token, { items: [], contextId: rootContextId, target });
    else {
      q.contextId = rootContextId;
      q.target = target;
    }
    return token;
  }

  resolve(vmId: string, name: string): number {
    return this.tokens.get(SharedQueues.key(vmId, name)) ?? 0;
  }

  dequeue(token: number): { code: number; data?: Uint8Array } {
    const q = this.queues.get(token);
    if (q === undefined) return { code: WasmResult.NotFound };
    const item = q.items.shift();
    if (item === undefined) return { code: WasmResult.Empty };
    return { code: WasmResult.Ok, data: item };
  }

  enqueue(token: number, data: Uint8Array): number {
    const q = this.queues.get(token);
    if (q === undefined) return WasmResult.NotFound;
    q.items.push(data.slice());
    this.enqueued++;
    const { contextId, target } = q;
    target.post(() => target.deliver(contextId, token));
    return WasmResult.Ok;
  }

  /** Test view: items waiting in a queue. */
  depth(vmId: string, name: string): number {
    const t = this.resolve(vmId, name);
    return this.queues.get(t)?.items.length ?? 0;
  }

  /** Test view: bytes waiting in a queue. */
  bytes(vmId: string, name: string): number {
    const t = this.resolve(vmId, name);
    return (this.queues.get(t)?.items ?? []).reduce((n, i) => n + i.length, 0);
  }
}
