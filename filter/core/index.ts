// The routing core: pure logic shared by the Proxy-Wasm filter and the control plane (via
// @assemblyscript/loader). No Proxy-Wasm or host imports may appear anywhere under core/.
export const PROTOCOL_VERSION: u32 = 1;
