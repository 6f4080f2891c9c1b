// Reads EP's error out of what a raw RPC client received, the way a generated client does:
// from the ep.errors.v1.ErrorDetail in the Connect JSON error or in gRPC's
// grpc-status-details-bin (trailer or trailers-only headers).
import { endStreamFromJson, errorFromJson } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { toEpError, type EpError } from "../common/errors.js";

/** The EpError in a Connect JSON error body (undefined when it is not one). */
export function epErrorOfConnectJson(json: unknown): EpError | undefined {
  if (!json || typeof json !== "object" || !("code" in json)) return undefined;
  return toEpError(errorFromJson(json as never, undefined, new Error("not a Connect error") as never));
}

/** The EpError in gRPC status fields: response headers, trailers, or a gRPC-Web trailer frame's text. */
export function epErrorOfGrpc(fields: Headers | string): EpError | undefined {
  let headers = fields;
  if (typeof headers === "string") {
    const parsed = new Headers();
    for (const line of headers.split("\r\n")) {
      const m = /^([\w-]+):\s*(.*)$/.exec(line.replace(/^[\s\S]*?(grpc-)/, "$1"));
      if (m) parsed.set(m[1], m[2]);
    }
    headers = parsed;
  }
  const err = findTrailerError(headers);
  return err ? toEpError(err) : undefined;
}

/** The EpError in a Connect streaming response's end-stream message (its first envelope here). */
export function epErrorOfConnectEndStream(body: Uint8Array): EpError | undefined {
  if (body.length < 5 || !(body[0] & 0b10)) return undefined;
  const { error } = endStreamFromJson(body.subarray(5, 5 + new DataView(body.buffer, body.byteOffset).getUint32(1)));
  return error ? toEpError(error) : undefined;
}
