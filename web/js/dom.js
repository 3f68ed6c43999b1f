// Small helpers for building the page's DOM without HTML strings: every
// piece of text from the gateway becomes a text node, never markup.

/**
 * Creates an element.
 * @param {string} tag e.g. `button.chip` (a tag, then optional `.class`es).
 * @param {object} [attrs] Attributes; `on*` functions become listeners,
 *   `false`/`null` values are left out.
 * @param {...(Node|string|null|undefined|false)} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs = {}, ...children) {
  const [name, ...classes] = tag.split(".");
  const element = document.createElement(name);
  if (classes.length) element.className = classes.join(" ");
  for (const [key, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (key.startsWith("on") && typeof value === "function") {
      element.addEventListener(key.slice(2), value);
    } else if (key in element && typeof value !== "string") {
      element[key] = value;
    } else {
      element.setAttribute(key, value === true ? "" : value);
    }
  }
  element.append(...children.filter((c) => c !== null && c !== undefined && c !== false));
  return element;
}

/** A compact one-line rendering of a JSON value, cut at `max` characters. */
export function compactJson(value, max = 160) {
  const text = JSON.stringify(value ?? {});
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** `"0.012s"` (a proto3 JSON Duration) as `12 ms` or `1.2 s`. */
export function formatDuration(duration) {
  const seconds = Number.parseFloat(String(duration ?? "0").replace(/s$/, ""));
  if (!Number.isFinite(seconds)) return "";
  return seconds < 1 ? `${Math.round(seconds * 1000)} ms` : `${seconds.toFixed(1)} s`;
}

/** A request id for idempotent retries (`request_id`). */
export function newRequestId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
