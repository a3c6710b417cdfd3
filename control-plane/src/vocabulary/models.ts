// What an engine says it serves: the cards of its OpenAI-compatible /v1/models answer. The
// adapter discovery (discovery/adapter-discovery.ts) reads them and the adapter catalog
// (model/adapter-catalog.ts) keeps them; neither imports the other.

/** One model card of an OpenAI-compatible /v1/models answer. */
export interface ModelCard {
  id: string;
  parent: string | null;
}
