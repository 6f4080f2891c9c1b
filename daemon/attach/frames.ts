// The attach protocol, the same on epd.sock, on the tower's /api/attach-ws and on the daemon's
// dial-back (docs/attach.md): WebSocket binary messages carry terminal bytes (output from the
// agent, keystrokes to it), text messages carry one JSON control frame each.
import { ATTACH_CLOSE } from "../../common/attach.js";
import { EpError } from "../../common/errors.js";

/** rw: keystrokes and resizes reach the PTY; ro: they are dropped. */
export type AttachMode = "rw" | "ro";

export type ControlFrame =
  /** First frame on every attach: what is attached and where the replay starts. */
  | {
      type: "hello";
      agent_id: string;
      target: "tmux" | "run";
      session?: string;
      mode: AttachMode;
      cols: number;
      rows: number;
      offset: number;
      replay: number;
      reset: boolean;
    }
  /** Client → server: the viewer's terminal size (rw viewers only reach the PTY). */
  | { type: "resize"; cols: number; rows: number }
  /** Tower → browser while the node dials back. */
  | { type: "status"; state: "dialing" | "connected" }
  /** A one-shot run of the followed agent started. */
  | { type: "run"; task_id: string; runtime: string }
  /** The process behind the terminal ended. */
  | { type: "exit"; exit_code?: number; signal?: string; reason: string; task_id?: string }
  /** Why the server is about to close the socket. */
  | { type: "error"; code: string; message: string };

/** WebSocket close codes (4000–4999 belong to the application). */
export const CLOSE = ATTACH_CLOSE;

export const MIN_SIZE = 1;
export const MAX_SIZE = 1000;

export function parseSize(name: string, raw: unknown, fallback?: number): number {
  if (raw === undefined || raw === null || raw === "") {
    if (fallback === undefined) throw new EpError("invalid_argument", `${name} is required`, { field: name });
    return fallback;
  }
  const n = typeof raw === "number" ? raw : Number(raw);
  if (!Number.isInteger(n) || n < MIN_SIZE || n > MAX_SIZE)
    throw new EpError("invalid_argument", `${name} must be an integer from ${MIN_SIZE} to ${MAX_SIZE}`, {
      field: name,
    });
  return n;
}

export function parseMode(raw: unknown): AttachMode {
  if (raw === undefined || raw === null || raw === "" || raw === "rw") return "rw";
  if (raw === "ro") return "ro";
  throw new EpError("invalid_argument", "mode must be rw or ro", { field: "mode" });
}

/** A client's control frame, or an invalid_argument naming what is wrong. */
export function parseClientFrame(text: string): ControlFrame {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new EpError("invalid_json", "a text message must be one JSON control frame");
  }
  if (!doc || typeof doc !== "object")
    throw new EpError("invalid_argument", "a control frame is a JSON object", { field: "type" });
  const f = doc as Record<string, unknown>;
  if (f.type === "resize") return { type: "resize", cols: parseSize("cols", f.cols), rows: parseSize("rows", f.rows) };
  throw new EpError(
    "invalid_argument",
    `unknown control frame type ${JSON.stringify(f.type)} (clients send binary input and {"type":"resize"})`,
    { field: "type" },
  );
}

export const frameText = (f: ControlFrame): string => JSON.stringify(f);

/** The close code that matches an error's class. */
export function closeCodeOf(err: EpError): number {
  switch (err.errorClass) {
    case "unauthenticated":
      return CLOSE.unauthenticated;
    case "forbidden":
      return CLOSE.forbidden;
    case "not_found":
      return CLOSE.not_found;
    case "unavailable":
      return CLOSE.unavailable;
    case "invalid":
      return 1008;
    default:
      return CLOSE.internal;
  }
}
