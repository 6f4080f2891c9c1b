// The attach protocol's names, shared by the tower, epd and the CLI (docs/attach.md): where each
// side listens, the dial-back proof header, and the WebSocket close codes (4000–4999 are ours).

/** epd.sock: a local viewer attaches here (`ep agent attach` on the node). */
export const EPD_ATTACH_PATH = "/attach";
/** The tower: a viewer (CLI, console) attaches here. */
export const ATTACH_WS_PATH = "/api/attach-ws";
/** The tower: a node dials back here for one attach. */
export const ATTACH_DIAL_PATH = "/api/attach-dial";
/** base64url(HMAC-SHA256(attach secret, attach id)) on the dial-back. */
export const ATTACH_PROOF_HEADER = "x-ep-attach-proof";

/** WebSocket close codes of an attach. */
export const ATTACH_CLOSE = {
  normal: 1000,
  going_away: 1001,
  internal: 1011,
  idle: 4000,
  unauthenticated: 4001,
  forbidden: 4003,
  not_found: 4004,
  slow_consumer: 4008,
  unavailable: 4503,
} as const;
