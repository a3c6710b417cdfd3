// Block-hash normalisation: every engine's block key becomes one unsigned 64-bit bigint, so a
// BlockRemoved finds what a BlockStored added and parent links join, whatever the encoding.
//
// - vLLM (default VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1) sends u64s; msgpack writes small values
//   in small forms (msgpackr returns those as numbers) and large ones as uint64 (bigint).
// - vLLM with that variable 0 sends the raw digest bytes. vLLM's int form is the digest's last
//   8 bytes read big-endian, so using the same rule here gives a block the same key in both
//   modes (llm-d does the same; shorter byte strings are left-padded with zeros).
// - SGLang sends a *signed* int64 (the first 8 digest bytes, big-endian, shifted into the signed
//   range). Its two's-complement u64 is those same 8 bytes read unsigned (Dynamo does the same).

const U64_MASK = (1n << 64n) - 1n;

/** Returns the normalised key, or null when the value cannot be a block hash. */
export function normaliseHash(value: unknown): bigint | null {
  if (typeof value === "bigint") {
    // msgpack cannot carry anything outside [-2^63, 2^64); negatives are SGLang's signed form.
    return value < 0n ? value & U64_MASK : value;
  }
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) return null;
    const big = BigInt(value);
    return big < 0n ? big & U64_MASK : big;
  }
  if (value instanceof Uint8Array) {
    if (value.length === 0) return null;
    let out = 0n;
    for (let i = Math.max(0, value.length - 8); i < value.length; i++) {
      out = (out << 8n) | BigInt(value[i] as number);
    }
    return out;
  }
  return null;
}

/** Normalises a list of hashes; null if it is not an array or any element is invalid. */
export function normaliseHashList(value: unknown): bigint[] | null {
  if (!Array.isArray(value)) return null;
  const out = new Array<bigint>(value.length);
  for (let i = 0; i < value.length; i++) {
    const h = normaliseHash(value[i]);
    if (h === null) return null;
    out[i] = h;
  }
  return out;
}
