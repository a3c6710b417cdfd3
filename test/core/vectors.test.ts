// Golden vectors through the Node build (build/kvroute-core.wasm via @assemblyscript/loader).
import { vectorSuite } from "./vector-suite.ts";

vectorSuite("Node core build", () => import("../../control-plane/src/core/kvroute-core.ts"));
