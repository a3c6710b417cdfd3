// Writes a StaticArray element without the bounds check. A checked write (`a[i] = v`) compiles to
// a call the optimizer does not inline — a shadow-stack push and a range test per element — and
// those calls were ~4 % of the scaling bench's profile, all in publication (bucket-encode,
// bucket-journal). This one is inlined (no call to it in build/kvroute-core.wat). Only for indices
// the caller has bounded itself; each use says how. The read side is AssemblyScript's
// `unchecked(a[i])`, whose write form is an assignment inside an expression, which Biome refuses.

export function put<T>(a: StaticArray<T>, i: i32, v: T): void {
  store<T>(changetype<usize>(a) + ((<usize>i) << alignof<T>()), v);
}
