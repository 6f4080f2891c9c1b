// The fleet folder's face: nodes, agents and their links, attach admission, the nodes' reported
// state. The rest of the folder is its own; other folders import only this and types.ts (docs/architecture.md).
export { attachProof, type AttachRelay, createAttachAdmission, localAttachRelay } from "./attach.js";
export { createFleetService, type FleetService } from "./fleet.js";
export { createNodeStateReads } from "./node-state.js";
