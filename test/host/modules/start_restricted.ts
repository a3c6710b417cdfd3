// Touches shared data from top-level code, i.e. inside _start, where Envoy allows only logging,
// WASI stdio/args/environ/clock/random: the call traps and the VM never starts.
import { log, sharedSet } from "./lib/raw";

export { malloc } from "./lib/raw";

export function proxy_abi_version_0_2_1(): void {}

log("start: logging is allowed here");
sharedSet("from-start", "x", 0);
