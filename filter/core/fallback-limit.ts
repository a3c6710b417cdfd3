// How many fallback endpoints a destination may list (GAIE's ordered list, walked by a
// gateway's retries). Dynamo's headers name the worker instance, so a retry elsewhere would
// carry a wrong worker id: its destination is one entry. `configured` is the plugin option
// destinationFallbacks (0 by default inline: Envoy's ORIGINAL_DST refuses lists).
import { ENGINE_DYNAMO } from "./cache-images";

export function fallbackLimit(engine: u8, configured: u32): i32 {
  if (engine === ENGINE_DYNAMO) return 0;
  return <i32>configured;
}
