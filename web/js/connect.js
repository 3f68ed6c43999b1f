// The Connect protocol (connectrpc.com/docs/protocol) with its JSON codec,
// over `fetch`: how this page calls the gateway's ChatGateway service.
//
// - Unary: `POST /<service>/<Method>` with `content-type: application/json`;
//   the body is the request message as proto3 JSON, the answer is the
//   response message, or, with a non-200 status, an error
//   `{code, message, details}`.
// - Server streaming: `content-type: application/connect+json`; the request
//   and every response message travel in envelopes (one flag byte, a 4-byte
//   big-endian length, the JSON bytes). The last envelope has the end-stream
//   flag (0x02) and holds `{error?, metadata?}`.
//
// Every failure surfaces as a `ConnectError` carrying the Connect code, the
// server's message and its `google.rpc` details.

import { decodeDetails } from "./details.js";

/** The gateway's service, as the Connect paths name it. */
export const GATEWAY = "parley.gateway.v1.ChatGateway";

const FLAG_COMPRESSED = 0x01;
const FLAG_END_STREAM = 0x02;
/** The largest envelope this page accepts (the gateway's message limit). */
const MAX_ENVELOPE_BYTES = 4 * 1024 * 1024;

/** A refused or failed call: Connect's error, decoded. */
export class ConnectError extends Error {
  /**
   * @param {string} code Connect code, e.g. `invalid_argument`.
   * @param {string} message The server's message for humans.
   * @param {Array<object>} details The `google.rpc` details, decoded where known.
   */
  constructor(code, message, details = []) {
    super(message || code);
    this.name = "ConnectError";
    this.code = code;
    this.details = details;
  }

  /** The stable `ErrorInfo.reason`, when the server sent one. */
  get reason() {
    const info = this.details.find((d) => d.type === "google.rpc.ErrorInfo");
    return info?.value?.reason ?? "";
  }
}

/** Connect's code for an HTTP status with no error body (the spec's table). */
function codeFromHttpStatus(status) {
  switch (status) {
    case 400: return "internal";
    case 401: return "unauthenticated";
    case 403: return "permission_denied";
    case 404: return "unimplemented";
    case 429:
    case 502:
    case 503:
    case 504: return "unavailable";
    default: return "unknown";
  }
}

/** Builds a ConnectError from an error JSON object (unary body or end-stream). */
function errorFromJson(json, fallbackCode) {
  const code = typeof json?.code === "string" ? json.code : fallbackCode;
  const message = typeof json?.message === "string" ? json.message : "";
  const details = Array.isArray(json?.details) ? decodeDetails(json.details) : [];
  return new ConnectError(code, message, details);
}

/** Reads a non-200 answer's body as a Connect error. */
async function errorFromResponse(response) {
  const fallback = codeFromHttpStatus(response.status);
  try {
    return errorFromJson(await response.json(), fallback);
  } catch {
    return new ConnectError(fallback, `HTTP ${response.status} ${response.statusText}`);
  }
}

/** Wraps a network failure (or an abort) as a ConnectError. */
function networkError(error) {
  if (error instanceof ConnectError) return error;
  if (error?.name === "AbortError") return new ConnectError("canceled", "the call was cancelled");
  return new ConnectError("unavailable", `the gateway cannot be reached: ${error?.message ?? error}`);
}

/** One envelope: flag byte, big-endian length, bytes. */
function envelope(bytes) {
  const framed = new Uint8Array(5 + bytes.length);
  new DataView(framed.buffer).setUint32(1, bytes.length, false);
  framed.set(bytes, 5);
  return framed;
}

/**
 * Splits a byte stream into envelopes.
 * @param {ReadableStreamDefaultReader<Uint8Array>} reader
 * @returns {AsyncGenerator<{flags: number, data: Uint8Array}>}
 */
async function* readEnvelopes(reader) {
  let buffer = new Uint8Array(0);
  for (;;) {
    while (buffer.length >= 5) {
      const length = new DataView(buffer.buffer, buffer.byteOffset).getUint32(1, false);
      if (length > MAX_ENVELOPE_BYTES) {
        throw new ConnectError("resource_exhausted", `a message of ${length} bytes is over this page's limit`);
      }
      if (buffer.length < 5 + length) break;
      yield { flags: buffer[0], data: buffer.subarray(5, 5 + length) };
      buffer = buffer.subarray(5 + length);
    }
    const { value, done } = await reader.read();
    if (done) {
      if (buffer.length > 0) throw new ConnectError("data_loss", "the stream ended inside a message");
      return;
    }
    const joined = new Uint8Array(buffer.length + value.length);
    joined.set(buffer);
    joined.set(value, buffer.length);
    buffer = joined;
  }
}

/** A Connect client of one service at one base URL. */
export class ConnectClient {
  /**
   * @param {object} options
   * @param {string} [options.baseUrl] Where the gateway is; the page's own origin by default.
   * @param {string} [options.service] The fully qualified service name.
   * @param {() => string} [options.token] The bearer token to send, if any.
   */
  constructor({ baseUrl = "", service = GATEWAY, token = () => "" } = {}) {
    this.baseUrl = baseUrl.replace(/\/$/, "");
    this.service = service;
    this.token = token;
  }

  headers(contentType) {
    const headers = { "content-type": contentType, "connect-protocol-version": "1" };
    const token = this.token();
    if (token) headers.authorization = `Bearer ${token}`;
    return headers;
  }

  url(method) {
    return `${this.baseUrl}/${this.service}/${method}`;
  }

  /**
   * A unary call.
   * @param {string} method e.g. `ListConversations`.
   * @param {object} request The request message as proto3 JSON.
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<object>} The response message as proto3 JSON.
   */
  async unary(method, request, { signal } = {}) {
    let response;
    try {
      response = await fetch(this.url(method), {
        method: "POST",
        headers: this.headers("application/json"),
        body: JSON.stringify(request),
        signal,
      });
    } catch (error) {
      throw networkError(error);
    }
    if (!response.ok) throw await errorFromResponse(response);
    try {
      return await response.json();
    } catch (error) {
      throw networkError(error);
    }
  }

  /**
   * A server-streaming call: yields each response message as it arrives and
   * throws the end-stream error, if any, once the stream is over.
   * @param {string} method e.g. `Chat`.
   * @param {object} request The request message as proto3 JSON.
   * @param {{signal?: AbortSignal}} [options]
   * @returns {AsyncGenerator<object>}
   */
  async *stream(method, request, { signal } = {}) {
    let response;
    try {
      response = await fetch(this.url(method), {
        method: "POST",
        headers: this.headers("application/connect+json"),
        body: envelope(new TextEncoder().encode(JSON.stringify(request))),
        signal,
      });
    } catch (error) {
      throw networkError(error);
    }
    if (!response.ok) throw await errorFromResponse(response);
    if (!response.body) throw new ConnectError("internal", "the answer has no body");

    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let ended = false;
    try {
      for await (const { flags, data } of readEnvelopes(reader)) {
        if (flags & FLAG_COMPRESSED) {
          throw new ConnectError("internal", "a compressed message arrived, but none was asked for");
        }
        const json = JSON.parse(decoder.decode(data));
        if (flags & FLAG_END_STREAM) {
          ended = true;
          if (json.error) throw errorFromJson(json.error, "unknown");
          return;
        }
        yield json;
      }
    } catch (error) {
      throw error instanceof ConnectError ? error : networkError(error);
    } finally {
      // A consumer that stops early (or an error) closes the connection.
      if (!ended) reader.cancel().catch(() => {});
    }
    if (!ended) throw new ConnectError("unavailable", "the stream ended before its end-stream message");
  }
}
