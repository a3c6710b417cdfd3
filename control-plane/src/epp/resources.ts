// The GAIE resources the picker follows for one InferencePool: InferenceObjectives (name →
// priority) and InferenceModelRewrites (model-rewrite.ts). As llm-d-router's reconcilers
// (pkg/epp/controller/inferenceobjective_reconciler.go), only objects whose poolRef names this
// pool — name, and group (default inference.networking.k8s.io) — count; an objective without a
// priority has priority 0. Objectives listed in the configuration (`epp.objectives`) count too;
// a watched objective of the same name wins.
import { type InferenceModelRewrite, ModelRewrites } from "./model-rewrite.ts";

/** llm-d.ai/v1alpha2 InferenceObjective, the fields the picker reads (apix/v1alpha2). */
export interface InferenceObjective {
  metadata?: { name?: string };
  spec?: { priority?: number; poolRef?: { group?: string; kind?: string; name?: string } };
}

export const POOL_GROUP = "inference.networking.k8s.io";

export interface PoolRef {
  name: string;
  group?: string;
}

export class EppResources {
  readonly rewrites: ModelRewrites;
  private watched = new Map<string, number>();

  constructor(
    private readonly configured: ReadonlyMap<string, number>,
    /** The pool objects must name; null = every object counts (no pool to match, e.g. tests). */
    private readonly pool: PoolRef | null,
    random: () => number = Math.random,
  ) {
    this.rewrites = new ModelRewrites(random);
  }

  /** The priority of an objective, watched or configured; undefined when neither knows it. */
  get(name: string): number | undefined {
    return this.watched.get(name) ?? this.configured.get(name);
  }

  /** Replaces the watched objectives with `objects` (every InferenceObjective of the namespace). */
  setObjectives(objects: Iterable<InferenceObjective>): void {
    const next = new Map<string, number>();
    for (const o of objects) {
      const name = o.metadata?.name;
      if (name === undefined || !this.ours(o.spec?.poolRef)) continue;
      const p = o.spec?.priority;
      next.set(name, typeof p === "number" && Number.isInteger(p) ? p : 0);
    }
    this.watched = next;
  }

  /** Replaces the rewrite rules with those of `objects` (every InferenceModelRewrite of the namespace). */
  setRewrites(objects: Iterable<InferenceModelRewrite>): void {
    this.rewrites.replace([...objects].filter((o) => this.ours(o.spec?.poolRef)));
  }

  private ours(ref: { group?: string; name?: string } | undefined): boolean {
    if (this.pool === null) return true;
    return ref?.name === this.pool.name && (ref.group ?? POOL_GROUP) === (this.pool.group ?? POOL_GROUP);
  }
}
