// Dynamo's worker instance id for a pod in its Kubernetes discovery (ai-dynamo/dynamo,
// lib/runtime/src/discovery/kube: `hash_pod_name`): Rust's `DefaultHasher::new()` — SipHash-1-3
// with zero keys — over the pod name as `str::hash` feeds it (the UTF-8 bytes, then one 0xFF
// byte), masked to 53 bits so the id survives a JSON number (releases before the mask used
// all 64 bits; those ids differ in the top 11 bits).
import { siphash } from "./siphash.ts";

const INSTANCE_ID_MASK = (1n << 53n) - 1n;

export function dynamoWorkerId(podName: string): bigint {
  const name = new TextEncoder().encode(podName);
  const bytes = new Uint8Array(name.length + 1);
  bytes.set(name);
  bytes[name.length] = 0xff;
  return siphash(bytes, 0n, 0n, 1, 3) & INSTANCE_ID_MASK;
}
