// Result codes shared by the core's parsers. Negative values are errors; every entry point that
// reads untrusted bytes returns one of these instead of trapping (a trap is an outage, REFERENCE §5).

/** The body ended in the middle of a value. */
export const ERR_TRUNCATED: i32 = -1;
/** Not JSON (bad token, bad escape, control character in a string, trailing bytes). */
export const ERR_SYNTAX: i32 = -2;
/** A string holds bytes that are not well-formed UTF-8. */
export const ERR_UTF8: i32 = -3;
/** Nesting deeper than the core accepts. */
export const ERR_DEPTH: i32 = -4;
/** The top-level value is not an object. */
export const ERR_NOT_OBJECT: i32 = -5;
/** More messages, content parts or prompt strings than the core records. */
export const ERR_LIMIT: i32 = -6;
/** A caller-supplied argument is out of range (e.g. chunk size 0). */
export const ERR_ARGUMENT: i32 = -7;
