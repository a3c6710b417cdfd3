// biome-ignore-all lint/style/useImportType: AssemblyScript has no type-only imports.
// The filter's hot path: scan the body, render the canonical stream, hash its chunks. One
// RequestHasher per VM is reused for every request; nothing here allocates once its buffers
// have grown to the largest request seen.
//
// Filter usage:
//   const hasher = new RequestHasher();                  // once per VM (unmanaged, never freed)
//   const tpl = decodeSegmentTemplate(ptr, len);         // once per configuration (null: not segmentable)
//   const err = hasher.scan.scan(body, bodyLen);         // < 0: malformed → route by load
//   …pick the pool from the request's model (hasher.scan.modelOff/modelLen/modelEsc; decode
//     with decodeString when modelEsc), then:
//   const status = hasher.hashScanned(body, ENDPOINT_CHAT, tpl, bos, bosLen, model, modelLen, lora, loraLen, chunk);
//   // RENDER_NONE → route by load; PARTIAL/EXACT → hasher.hashCount u64 hashes at hasher.hashes.ptr
// or hasher.run(...) for both steps when the model is already known.
import { ByteBuf } from "./byte-buf";
import { chainChunks, rootHash } from "./chunk-hash";
import { ERR_ARGUMENT } from "./errors";
import { RequestScan } from "./json-scan";
import { decodeString } from "./json-string";
import { RENDER_NONE, Renderer } from "./render";
import { SegmentTemplate } from "./segment-template";

export const ENDPOINT_CHAT: i32 = 1;
export const ENDPOINT_COMPLETIONS: i32 = 2;

// Unmanaged (one per VM, never freed), like the scanner and renderer it holds.
@unmanaged
export class RequestHasher {
  readonly scan: RequestScan = new RequestScan();
  readonly renderer: Renderer = new Renderer();
  /** One u64 per complete chunk of the rendered stream. */
  readonly hashes: ByteBuf = new ByteBuf(128 * 8);
  hashCount: i32 = 0;
  /**
   * A cache salt that comes from outside the body and wins over its `cache_salt` when non-empty:
   * Dynamo's frontend makes a non-empty `x-tenant-id` header the request's salt. The caller sets
   * `len` per request (0: the body decides).
   */
  readonly saltOverride: ByteBuf = new ByteBuf(64);
  private salt: ByteBuf = new ByteBuf(64);
  private key: ByteBuf = new ByteBuf(256);

  /**
   * Returns a negative error (errors.ts) when the body is not a usable request, else the render
   * status (RENDER_NONE / PARTIAL / EXACT). With PARTIAL or EXACT, `hashes` holds `hashCount`
   * chunk hashes of `renderer.out`. model/lora are the pool's canonical names (wire-format §3).
   */
  run(
    body: usize,
    bodyLen: i32,
    endpoint: i32,
    template: SegmentTemplate | null,
    bos: usize,
    bosLen: i32,
    model: usize,
    modelLen: i32,
    lora: usize,
    loraLen: i32,
    chunk: i32,
  ): i32 {
    this.hashCount = 0;
    if (chunk < 1) return ERR_ARGUMENT;
    const err = this.scan.scan(body, bodyLen);
    if (err < 0) return err;
    return this.hashScanned(body, endpoint, template, bos, bosLen, model, modelLen, lora, loraLen, chunk);
  }

  /**
   * hashScanned for a pool the filter already decoded: its chat template (null for completions
   * or an unsegmentable template), BOS text and canonical model name, and the request's LoRA
   * adapter name (null: the base model).
   */
  hashForPool(
    body: usize,
    endpoint: i32,
    template: SegmentTemplate | null,
    bosText: ArrayBuffer,
    model: ArrayBuffer,
    lora: ArrayBuffer | null,
    chunk: i32,
  ): i32 {
    return this.hashScanned(
      body,
      endpoint,
      template,
      changetype<usize>(bosText),
      bosText.byteLength,
      changetype<usize>(model),
      model.byteLength,
      lora === null ? 0 : changetype<usize>(lora),
      lora === null ? 0 : lora.byteLength,
      chunk,
    );
  }

  /**
   * The second half of run() for a body `scan` has already scanned: the filter scans first,
   * because the request's `model` decides the pool whose template and canonical name it needs.
   */
  hashScanned(
    body: usize,
    endpoint: i32,
    template: SegmentTemplate | null,
    bos: usize,
    bosLen: i32,
    model: usize,
    modelLen: i32,
    lora: usize,
    loraLen: i32,
    chunk: i32,
  ): i32 {
    this.hashCount = 0;
    if (chunk < 1) return ERR_ARGUMENT;
    const scan = this.scan;
    let status = RENDER_NONE;
    if (endpoint === ENDPOINT_CHAT) {
      if (template != null) status = this.renderer.renderChat(scan, template);
    } else if (endpoint === ENDPOINT_COMPLETIONS) {
      status = this.renderer.renderCompletion(scan, bos, bosLen);
    } else {
      return ERR_ARGUMENT;
    }
    if (status === RENDER_NONE) return status;
    let salt = this.salt;
    salt.len = 0;
    if (this.saltOverride.len > 0) salt = this.saltOverride;
    else if (scan.saltLen > 0) decodeString(body + <usize>scan.saltOff, scan.saltLen, scan.saltEsc, salt);
    const h0 = rootHash(model, modelLen, lora, loraLen, salt.ptr, salt.len, this.key);
    const out = this.renderer.out;
    this.hashes.len = 0;
    this.hashes.reserve((out.len / chunk) * 8);
    this.hashCount = chainChunks(h0, out.ptr, out.len, chunk, this.hashes.ptr);
    this.hashes.len = this.hashCount * 8;
    return status;
  }
}
