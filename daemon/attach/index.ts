// Public surface of the PTY attach gateway (docs/attach.md).
export type { AttachHub, AttachHubOptions, AttachTarget, RunInfo, ViewerOptions } from "./attach-hub.js";
export { createAttachHub } from "./attach-hub.js";
export type { AttachMode, ControlFrame } from "./frames.js";
export { CLOSE, frameText, parseClientFrame } from "./frames.js";
export type { AttachGateway, AttachGatewayOptions } from "./gateway.js";
export { ATTACH_PATH, DIAL_PATH, PROOF_HEADER, attachProof, createAttachGateway } from "./gateway.js";
export { createTargetResolver, type ResolveTarget, type TargetDeps } from "./targets.js";
