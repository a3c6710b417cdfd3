// Live HTTP contexts of this VM by context id: the registry the ABI dispatch (index.ts) fills and
// the root's tick reads (streams waiting for a body). Its own module so that the VM's state
// (state.ts), which the streams use, does not import the stream back.
import { KvrouteStream } from "./stream";

export const streams = new Map<u32, KvrouteStream>();
