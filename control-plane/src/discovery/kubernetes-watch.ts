// Keeps an in-memory copy of one kind of object (by label selector, in one namespace) in step
// with the API server: list, then watch from the list's resourceVersion. When the watch ends
// for any reason (dropped connection, server timeout, an ERROR event such as 410 Gone, a
// failed request) it lists again after a backoff. The copy is replaced only by a successful
// list, so an outage never empties it: the last known state stays in use until the API
// answers again. Neither a list nor a watch can hang forever on a dead connection: a list
// has a deadline, and a watch asks the server to end it after `timeoutSeconds` and is cut by
// the client a little later if the server does not.
import type { KubeConfig } from "@kubernetes/client-node";
import { Watch } from "@kubernetes/client-node";

interface Named {
  metadata?: { name?: string };
}

export interface ListResult<T> {
  items: T[];
  metadata?: { resourceVersion?: string };
}

export interface ListWatchOptions<T> {
  kubeConfig: KubeConfig;
  /** API path of the collection, e.g. /api/v1/namespaces/llm/pods. */
  path: string;
  labelSelector: string;
  list: () => Promise<ListResult<T>>;
  /** Called after every list and every watch event (the copy changed, or may have). */
  onChange: () => void;
  onError: (err: unknown) => void;
  retryMinMs?: number;
  retryMaxMs?: number;
  /** A list that has not answered by then counts as failed. */
  listTimeoutMs?: number;
  /** The server ends each watch after this long (then a relist)… */
  watchTimeoutSeconds?: number;
  /** …and the client cuts it this much later if the server did not. */
  watchGraceMs?: number;
}

class Deadline extends Error {}

/** Resolves like `p`, or rejects with Deadline after `ms`, or resolves null once `stopped` fires. */
function bounded<T>(p: Promise<T>, ms: number, stopped: Promise<void>): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Deadline(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, deadline, stopped.then(() => null)]).finally(() => clearTimeout(timer));
}

export class ListWatch<T extends Named> {
  readonly objects = new Map<string, T>();
  /** True once a list succeeded: the copy is a complete picture (possibly stale). */
  synced = false;
  /** Lists made so far (observability and tests). */
  lists = 0;
  #stopped = false;
  #abort: AbortController | undefined;
  #wake: (() => void) | undefined;
  /** Ends the open watch (even one whose request has not been answered yet). */
  #endWatch: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  #signalStop: () => void = () => {};
  readonly #stoppedSignal = new Promise<void>((r) => (this.#signalStop = r));

  constructor(private readonly opts: ListWatchOptions<T>) {}

  start(): void {
    this.#loop ??= this.#run();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#signalStop();
    this.#abort?.abort();
    this.#endWatch?.();
    this.#wake?.();
    await this.#loop;
  }

  async #run(): Promise<void> {
    const min = this.opts.retryMinMs ?? 250;
    const max = this.opts.retryMaxMs ?? 10_000;
    let failures = 0;
    while (!this.#stopped) {
      let watchedAt = Number.POSITIVE_INFINITY;
      try {
        const list = await bounded(this.opts.list(), this.opts.listTimeoutMs ?? 30_000, this.#stoppedSignal);
        if (list === null || this.#stopped) return;
        this.lists++;
        this.objects.clear();
        for (const item of list.items) {
          const name = item.metadata?.name;
          if (name !== undefined) this.objects.set(name, item);
        }
        this.synced = true;
        failures = 0;
        this.opts.onChange();
        watchedAt = Date.now();
        const ended = await this.#watch(list.metadata?.resourceVersion);
        if (ended !== null) throw ended;
      } catch (err) {
        if (this.#stopped) return;
        failures++;
        this.opts.onError(err);
      }
      if (this.#stopped) return;
      // A clean end after a while (server-side timeout) relists at once; errors back off
      // exponentially, and so does a server that keeps closing watches straight away.
      const quick = Date.now() - watchedAt < 1000;
      const delay = failures > 0 ? Math.min(max, min * 2 ** (failures - 1)) : quick ? min : 0;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** Applies watch events until the stream ends; resolves with the error that ended it, or null. */
  #watch(resourceVersion: string | undefined): Promise<unknown> {
    return new Promise((resolve) => {
      const watch = new Watch(this.opts.kubeConfig);
      const timeoutSeconds = this.opts.watchTimeoutSeconds ?? 300;
      const query: Record<string, string | boolean | number> = {
        labelSelector: this.opts.labelSelector,
        allowWatchBookmarks: true,
        timeoutSeconds,
      };
      if (resourceVersion !== undefined) query.resourceVersion = resourceVersion;
      let ended = false;
      // A watch the server does not end in time is a dead connection nobody noticed.
      const cut = setTimeout(
        () => end(new Deadline(`watch ${this.opts.path} silent past its ${timeoutSeconds} s timeout`)),
        timeoutSeconds * 1000 + (this.opts.watchGraceMs ?? 30_000),
      );
      const end = (err: unknown) => {
        if (ended) return;
        ended = true;
        clearTimeout(cut);
        this.#abort?.abort();
        resolve(err);
      };
      this.#endWatch = () => end(null);
      watch
        .watch(
          this.opts.path,
          query,
          (type: string, object: T & { code?: number; message?: string }) => {
            if (ended) return;
            const name = object?.metadata?.name;
            if (type === "ADDED" || type === "MODIFIED") {
              if (name !== undefined) this.objects.set(name, object);
            } else if (type === "DELETED") {
              if (name !== undefined) this.objects.delete(name);
            } else if (type === "ERROR") {
              // Typically 410 Gone (resourceVersion too old): only a fresh list can recover.
              end(
                new Error(`watch ${this.opts.path}: ${object?.code ?? "?"} ${object?.message ?? ""}`.trim()),
              );
              return;
            } else {
              return; // BOOKMARK: nothing changed
            }
            this.opts.onChange();
          },
          (err: unknown) => end(err ?? null),
        )
        .then((controller) => {
          this.#abort = controller;
          if (ended || this.#stopped) controller.abort();
        }, end);
    });
  }
}
