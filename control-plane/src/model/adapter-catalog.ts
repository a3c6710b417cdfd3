// Which LoRA adapters each pool serves: the configured ones first, then those the engines'
// /v1/models list over one of the pool's models (vLLM lists an adapter with its base model as
// `parent`). An adapter's position is its id in the shared-data images (kvr.cfg's adapter table,
// kvr.load's loaded-adapter ids), so the list only grows within an epoch: an id never changes
// meaning while a gateway may hold a load image that uses it.
import { ADAPTER_NAME, type Config, MAX_POOL_ADAPTERS } from "../config/schema.ts";
import type { ModelCard } from "../vocabulary/models.ts";

export class AdapterCatalog {
  readonly #byPool = new Map<string, string[]>();
  /** Every name a request's `model` can carry → the pool serving it (base models and adapters). */
  readonly #owner = new Map<string, string>();
  readonly #models = new Map<string, Set<string>>();
  /** Adapters an engine listed that could not be added (name, collision, table full), for logs. */
  readonly refused = new Map<string, string>();

  constructor(cfg: Config) {
    for (const p of cfg.pools) {
      this.#models.set(p.name, new Set(p.models));
      for (const m of p.models) this.#owner.set(m, p.name);
    }
    for (const p of cfg.pools) {
      this.#byPool.set(p.name, [...p.adapters]);
      for (const a of p.adapters) this.#owner.set(a, p.name);
    }
  }

  /** The pool's adapters in id order. */
  adapters(pool: string): readonly string[] {
    return this.#byPool.get(pool) ?? [];
  }

  /** The adapter's id in its pool's table, or -1. */
  idOf(pool: string, adapter: string): number {
    return this.#byPool.get(pool)?.indexOf(adapter) ?? -1;
  }

  /**
   * An engine of `pool` answered /v1/models: adds the adapters whose parent is one of the pool's
   * models. Returns true when the table grew (kvr.cfg must be published again).
   */
  discovered(pool: string, cards: readonly ModelCard[]): boolean {
    const list = this.#byPool.get(pool);
    const models = this.#models.get(pool);
    if (list === undefined || models === undefined) return false;
    let grew = false;
    for (const c of cards) {
      if (c.parent === null || !models.has(c.parent)) continue;
      const owner = this.#owner.get(c.id);
      if (owner === pool) continue;
      const why =
        owner !== undefined
          ? `already served by pool ${owner}`
          : !ADAPTER_NAME.test(c.id)
            ? "not a valid adapter name (docs/configuration.md)"
            : list.length >= MAX_POOL_ADAPTERS
              ? `the pool already has ${MAX_POOL_ADAPTERS} adapters`
              : null;
      if (why !== null) {
        this.refused.set(`${pool}/${c.id}`, why);
        continue;
      }
      list.push(c.id);
      this.#owner.set(c.id, pool);
      grew = true;
    }
    return grew;
  }
}
