// A request's priority (docs/configuration.md "Priority"): three named levels, read from one header
// value byte for byte — "critical", "standard", "sheddable", lower case, nothing around them. No
// integers, no case folding, no trimming: a value that is almost a level ("Critical", "critical ")
// is invalid, and the caller treats it as the default and counts it (like rank-header.ts, whose
// strictness keeps a lenient parser from giving a client more than it asked for).
//
// The level codes are also the report's priority byte (docs/wire-format.md §6): 0 is the default,
// so a record of an older filter (reserved byte 0) reads as standard.

export const PRIORITY_STANDARD: i32 = 0;
export const PRIORITY_SHEDDABLE: i32 = 1;
export const PRIORITY_CRITICAL: i32 = 2;
export const PRIORITY_INVALID: i32 = -1;

/** Names by level code, for stats. */
export const PRIORITY_NAMES: string[] = ["standard", "sheddable", "critical"];

// The level names as bytes, compared in place.
const CRITICAL = memory.data<u8>([0x63, 0x72, 0x69, 0x74, 0x69, 0x63, 0x61, 0x6c]);
const STANDARD = memory.data<u8>([0x73, 0x74, 0x61, 0x6e, 0x64, 0x61, 0x72, 0x64]);
const SHEDDABLE = memory.data<u8>([0x73, 0x68, 0x65, 0x64, 0x64, 0x61, 0x62, 0x6c, 0x65]);

/** The level a header value names, or PRIORITY_INVALID. */
export function parsePriority(p: usize, len: i32): i32 {
  if (len === 8 && memory.compare(p, CRITICAL, 8) === 0) return PRIORITY_CRITICAL;
  if (len === 8 && memory.compare(p, STANDARD, 8) === 0) return PRIORITY_STANDARD;
  if (len === 9 && memory.compare(p, SHEDDABLE, 9) === 0) return PRIORITY_SHEDDABLE;
  return PRIORITY_INVALID;
}
