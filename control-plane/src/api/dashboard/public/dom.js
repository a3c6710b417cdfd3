// Builds elements with text content only: request ids and gateway ids come from outside, so
// nothing received is ever parsed as HTML.

/**
 * h("td", { class: "num", data: { field: "running" } }, "3")
 * @param {string} tag
 * @param {Record<string, unknown>} [attrs]
 * @param {...(Node | string | number | null | undefined)} children
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  for (const c of children) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** Same as h() for SVG elements. */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  for (const c of children) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "data") for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = String(dv);
    // Through the CSSOM: the page's Content-Security-Policy forbids inline style attributes.
    else if (k === "style") for (const [sk, sv] of Object.entries(v)) el.style.setProperty(sk, String(sv));
    else el.setAttribute(k, String(v));
  }
}
