// Counting the shipped module's host calls by Proxy-Wasm function: every import the Node host
// gives a VM is wrapped to report its name before it runs — the module itself is unchanged. For
// benches and tests that say how many calls a request makes (not timed). Affects every VM the
// process starts after the call, until the returned function restores the host's own imports.
import { hostImports } from "../../host/imports/index.ts";
import { registerHostImports } from "../../host/thread.ts";

export function countHostCalls(onCall: (name: string) => void): () => void {
  registerHostImports((t) => {
    const imports = hostImports(t) as Record<string, Record<string, unknown>>;
    for (const mod of Object.values(imports))
      for (const [name, f] of Object.entries(mod)) {
        if (typeof f !== "function") continue;
        const call = f as (...a: unknown[]) => unknown;
        mod[name] = (...a: unknown[]) => {
          onCall(name);
          return call(...a);
        };
      }
    return imports as WebAssembly.Imports;
  });
  return () => registerHostImports(hostImports);
}
