// Which module may import which: the layers of docs/architecture.md, checked by `npm test`
// (`npm run lint:deps`). Type-only imports count: a circle of types is still a circle.
// A rule names what must NOT be imported; every path is relative to the repository root.

const SRC = "^control-plane/src/";
/** The control plane's sources: where facts come from (engines' events, metrics, discovery). */
const SOURCES = `${SRC}(events|load|discovery)/`;
/** The model: what the control plane knows (index, fleet and load, pool tokens) and the core it uses. */
const MODEL = `${SRC}(index|model|pools|tokens|core)/`;
/** Publication: what goes to and comes from gateways and peer replicas. */
const PUBLICATION = `${SRC}(publish|sync|reports|replicas)/`;
/** The surfaces and the composition on top. */
const TOP = `${SRC}(api|epp|tracing|cli)/|^control-plane/src/(app|config-reload)\\.ts$`;

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment:
        "An import circle says a module wants an interface of its own (or a registry instead of a back-import).",
      from: {},
      to: { circular: true },
    },
    {
      name: "product-not-from-test-or-bench",
      severity: "error",
      comment: "Product code (control plane, simulator, host, filter) never imports tests or benchmarks.",
      from: { path: "^(control-plane|host|filter)/" },
      to: { path: "^(test|bench)/" },
    },
    {
      name: "neutral-modules-import-no-layer",
      severity: "error",
      comment: "vocabulary/ (shared types) and common/ (shared helpers) sit under every layer.",
      from: { path: `${SRC}(vocabulary|common)/` },
      to: { path: SRC, pathNot: `${SRC}(vocabulary|common)/` },
    },
    {
      name: "config-imports-no-layer",
      severity: "error",
      comment: "Every layer reads the configuration; it reads none of them.",
      from: { path: `${SRC}config/` },
      to: { path: SRC, pathNot: `${SRC}(config|vocabulary|common)/` },
    },
    {
      name: "sources-know-no-model",
      severity: "error",
      comment: "Sources report facts in the vocabulary; they do not know who keeps them.",
      from: { path: SOURCES },
      to: { path: `${MODEL}|${PUBLICATION}|${TOP}` },
    },
    {
      name: "model-knows-no-sources",
      severity: "error",
      comment: "The model is fed in the vocabulary (vocabulary/), not by importing its sources.",
      from: { path: MODEL },
      to: { path: SOURCES },
    },
    {
      name: "model-knows-no-publication",
      severity: "error",
      comment: "sources → model → publication: the model does not know how it is published.",
      from: { path: MODEL },
      to: { path: `${PUBLICATION}|${TOP}` },
    },
    {
      name: "publication-below-the-surfaces",
      severity: "error",
      comment: "Publication uses the model and the shared helpers (common/), never the HTTP surface.",
      from: { path: PUBLICATION },
      to: { path: `${SOURCES}|${TOP}` },
    },
    {
      name: "surfaces-below-the-composition",
      severity: "error",
      comment: "api/, epp/ and tracing/ are parts that app.ts and cli/ assemble.",
      from: { path: `${SRC}(api|epp|tracing)/` },
      to: { path: `${SRC}cli/|^control-plane/src/(app|config-reload)\\.ts$` },
    },
    {
      name: "app-below-cli",
      severity: "error",
      from: { path: "^control-plane/src/app\\.ts$" },
      to: { path: `${SRC}cli/` },
    },
    {
      name: "simulator-is-not-the-router",
      severity: "error",
      comment:
        "The simulator stands for vLLM: its own tokenizer loading, chat-template rendering and endpoint rules, so a router bug cannot hide behind the simulator doing the same.",
      from: { path: "^control-plane/sim/" },
      to: { path: "^control-plane/src/|^host/|^filter/" },
    },
    {
      name: "router-starts-the-simulator-only-from-the-cli",
      severity: "error",
      from: { path: SRC, pathNot: `${SRC}cli/` },
      to: { path: "^control-plane/sim/" },
    },
    {
      name: "host-only-from-epp-and-cli",
      severity: "error",
      comment:
        "The control plane runs the Node Proxy-Wasm host only to embed the filter (epp/) or serve the demo (cli/).",
      from: { path: SRC, pathNot: `${SRC}(epp|cli)/` },
      to: { path: "^host/" },
    },
    {
      name: "host-stands-alone",
      severity: "error",
      comment: "The Node Proxy-Wasm host loads a module by bytes; it imports no kvroute part.",
      from: { path: "^host/" },
      to: { path: "^(control-plane|filter|test|bench|scripts)/" },
    },
    {
      name: "filter-stands-alone",
      severity: "error",
      comment: "The filter is AssemblyScript compiled on its own.",
      from: { path: "^filter/" },
      to: { path: "^(control-plane|host|test|bench|scripts)/" },
    },
    {
      name: "core-without-host-imports",
      severity: "error",
      comment: "filter/core is the routing core: pure, no Proxy-Wasm, runs under Node tests too.",
      from: { path: "^filter/core/" },
      to: { path: "^filter/assembly/|node_modules/@gcoredev/proxy-wasm-sdk-as" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^build/" },
    tsConfig: { fileName: "tsconfig.json" },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: [".ts", ".js", ".mjs", ".cjs", ".json"] },
  },
};
