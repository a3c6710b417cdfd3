// WASI functions the host test modules call directly (imported from "wasi_snapshot_preview1",
// the name of this file).
export declare function clock_time_get(id: u32, precision: u64, p: usize): u16;
export declare function fd_write(fd: u32, iovs: usize, n: usize, written: usize): u16;
export declare function random_get(p: usize, n: usize): u16;
