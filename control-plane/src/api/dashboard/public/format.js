// Number formatting shared by the dashboard's views.

/** 0.375 → "37.5%", 0.75 → "75%". */
export const percent = (ratio) => `${Number((ratio * 100).toFixed(1))}%`;

export const integer = (n) => (n === null || n === undefined ? "–" : Math.round(n).toLocaleString("en-US"));

/** Milliseconds as "850 ms", "3.2 s", "4 min". */
export function duration(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** Clock time of an epoch-ms stamp, HH:MM:SS. */
export const clock = (ms) => new Date(ms).toISOString().slice(11, 19);

/** The short name of a slot key "pool/address#rank" → "address#rank". */
export const shortSlot = (key) => (key === null ? "?" : key.slice(key.indexOf("/") + 1));

export const sum = (rec) => Object.values(rec ?? {}).reduce((a, b) => a + (b ?? 0), 0);
