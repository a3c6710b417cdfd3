// What a dirty bucket's publication sends gateways: the rows that changed, not the whole image
// (filter/core/bucket-patch.ts; docs/wire-format.md §5). The core computes the patch from the
// image gateways hold to the freshly encoded one and applies it to the held image with the same
// function the filter's leader runs, so both ends keep the same bytes.
import { core } from "../core/core-wasm.ts";

export interface BucketPublication {
  /** The image after this publication, as every gateway will hold it. */
  image: Uint8Array;
  /** The patch from the previous image, or null when the whole image is the cheaper message. */
  patch: Uint8Array | null;
}

/**
 * The publication that takes gateways from `held` (absent: never published) to `fresh`'s rows,
 * or null when they hold those rows already (in another order).
 */
export function publishBucket(held: Uint8Array | undefined, fresh: Uint8Array): BucketPublication | null {
  if (held === undefined) return { image: fresh, patch: null };
  const c = core();
  const io = c.io(held.length + fresh.length);
  c.u8.set(held, io);
  c.u8.set(fresh, io + held.length);
  const patchLen = c.ex.bucketDiffIo(io, held.length, io + held.length, fresh.length);
  if (patchLen === 0) return null;
  // A malformed held image (never published by this process) or a patch as large as the image:
  // send the image.
  if (patchLen < 0 || patchLen >= fresh.length) return { image: fresh, patch: null };
  const patch = c.bytes(c.ex.patchOutPtr(), patchLen);
  const at = c.io(held.length + patchLen);
  c.u8.set(held, at);
  c.u8.set(patch, at + held.length);
  const imageLen = c.ex.bucketPatchIo(at, held.length, at + held.length, patchLen);
  if (imageLen < 0) return { image: fresh, patch: null };
  return { image: c.bytes(c.ex.patchedOutPtr(), imageLen), patch };
}
