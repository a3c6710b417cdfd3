// vLLM's `BlockStored.extra_keys` → the request's cache_salt.
//
// vLLM (vllm/v1/core/kv_cache_utils.py, generate_block_hash_extra_keys) mixes a per-block tuple
// into every block hash: `lora_name` (every block) + multimodal keys + `cache_salt` (the
// request's first block only, i.e. the block with no parent) + a prompt-embeds digest, and
// publishes one such tuple (or None) per stored block. The tuple elements are raw values in
// both event encodings (array form before v0.26, tagged maps after, vllm PR #42892):
//   - LoRA name: a string, first (older vLLM put the adapter's int id there instead);
//   - multimodal keys: `[identifier, offset]` pairs (older vLLM: bare hash strings);
//   - cache_salt: a string, after the multimodal keys;
//   - prompt embeds: bytes, last.
// A typed form was proposed (vllm PR #55488, closed unmerged): tagged structs such as
// `{"type": "cache_salt", "salt": …}` and `{"type": "lora", "name": …}`; it is read too.
//
// So in the first block's tuple, after a leading LoRA name, the salt is the last string. An
// older engine's bare multimodal hash with no salt after it is taken for a salt as well: such a
// block then matches no text request, which is right, since its hash covers an image no text
// prompt carries.

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/**
 * The salt carried by a stored run of blocks, or null. Only a run that starts a sequence
 * (`parent` null) can carry one; a later block inherits its parent's salt through the chain.
 */
export function saltFromExtraKeys(
  extraKeys: readonly unknown[] | null,
  parentIsNull: boolean,
  loraName: string | null,
): string | null {
  if (!parentIsNull || extraKeys === null) return null;
  const first = extraKeys[0];
  if (!Array.isArray(first)) return null;
  let salt: string | null = null;
  for (let i = 0; i < first.length; i++) {
    const key = first[i];
    if (isMap(key)) {
      if (key.type === "cache_salt" && typeof key.salt === "string") return key.salt === "" ? null : key.salt;
      continue;
    }
    if (typeof key !== "string") continue;
    if (i === 0 && loraName !== null && key === loraName) continue;
    salt = key;
  }
  return salt === "" ? null : salt;
}
