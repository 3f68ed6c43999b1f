// The `google.rpc` error details of a Connect error, decoded for display.
//
// Connect's JSON error carries each detail as `{type, value, debug?}`:
// `value` is the detail's protobuf bytes in base64. When the server adds
// `debug` (the detail as JSON) it is used as is; otherwise the few detail
// types Parley sends (ErrorInfo, BadRequest, RetryInfo, QuotaFailure) are
// read here with a minimal protobuf wire reader. Unknown types keep their
// name, so they can still be shown.

/** Base64 (standard or URL alphabet, padded or not) to bytes. */
function base64Bytes(text) {
  const standard = text.replace(/-/g, "+").replace(/_/g, "/");
  const padded = standard + "=".repeat((4 - (standard.length % 4)) % 4);
  const binary = atob(padded);
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

/**
 * The fields of one protobuf message: field number → list of values
 * (numbers for varints, byte arrays for length-delimited fields).
 */
function fields(bytes) {
  const out = new Map();
  let at = 0;
  const varint = () => {
    let value = 0;
    let scale = 1;
    for (;;) {
      if (at >= bytes.length) throw new Error("truncated varint");
      const byte = bytes[at++];
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
  };
  while (at < bytes.length) {
    const key = varint();
    const number = Math.floor(key / 8);
    const wire = key % 8;
    let value;
    if (wire === 0) value = varint();
    else if (wire === 2) {
      const length = varint();
      value = bytes.subarray(at, at + length);
      at += length;
    } else if (wire === 1) { value = null; at += 8; }
    else if (wire === 5) { value = null; at += 4; }
    else throw new Error(`unsupported wire type ${wire}`);
    if (!out.has(number)) out.set(number, []);
    out.get(number).push(value);
  }
  return out;
}

const utf8 = new TextDecoder();
const text = (f, n) => (f.get(n)?.length ? utf8.decode(f.get(n).at(-1)) : "");
const messages = (f, n) => (f.get(n) ?? []).map(fields);

/** Readers of the detail types Parley sends, by full name. */
const READERS = {
  "google.rpc.ErrorInfo": (f) => ({
    reason: text(f, 1),
    domain: text(f, 2),
    metadata: Object.fromEntries(messages(f, 3).map((e) => [text(e, 1), text(e, 2)])),
  }),
  "google.rpc.BadRequest": (f) => ({
    fieldViolations: messages(f, 1).map((v) => ({ field: text(v, 1), description: text(v, 2) })),
  }),
  "google.rpc.RetryInfo": (f) => {
    const delay = messages(f, 1)[0];
    const seconds = (delay?.get(1)?.at(-1) ?? 0) + (delay?.get(2)?.at(-1) ?? 0) / 1e9;
    return { retryDelay: `${seconds}s` };
  },
  "google.rpc.QuotaFailure": (f) => ({
    violations: messages(f, 1).map((v) => ({ subject: text(v, 1), description: text(v, 2) })),
  }),
};

/**
 * Decodes Connect error details.
 * @param {Array<{type: string, value?: string, debug?: object}>} details
 * @returns {Array<{type: string, value: object | null}>}
 */
export function decodeDetails(details) {
  return details.map((detail) => {
    const type = String(detail?.type ?? "").replace(/^type\.googleapis\.com\//, "");
    if (detail?.debug && typeof detail.debug === "object") return { type, value: detail.debug };
    const read = READERS[type];
    if (!read || typeof detail?.value !== "string") return { type, value: null };
    try {
      return { type, value: read(fields(base64Bytes(detail.value))) };
    } catch {
      return { type, value: null };
    }
  });
}

/** One line per detail, for people: `ErrorInfo: MODEL_NOT_ALLOWED (parley.dev)`. */
export function describeDetail({ type, value }) {
  const short = type.replace(/^google\.rpc\./, "");
  if (!value) return short;
  switch (type) {
    case "google.rpc.ErrorInfo": {
      const meta = Object.entries(value.metadata ?? {}).map(([k, v]) => `${k}=${v}`).join(", ");
      return `${short}: ${value.reason}${value.domain ? ` (${value.domain})` : ""}${meta ? ` — ${meta}` : ""}`;
    }
    case "google.rpc.BadRequest":
      return `${short}: ${(value.fieldViolations ?? []).map((v) => `${v.field}: ${v.description}`).join("; ")}`;
    case "google.rpc.RetryInfo":
      return `${short}: retry after ${value.retryDelay}`;
    case "google.rpc.QuotaFailure":
      return `${short}: ${(value.violations ?? []).map((v) => `${v.subject} ${v.description}`).join("; ")}`;
    default:
      return `${short}: ${JSON.stringify(value)}`;
  }
}
