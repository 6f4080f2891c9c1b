// The events folder's face: reading the event log and following it live (SSE, WebSocket, Connect
// stream). The rest of the folder is its own; other folders import only this and types.ts (docs/architecture.md).
export { createEventService, eventQuery } from "./events.js";
export { chunkOf } from "./frames.js";
export {
  createEventStream,
  type EventStream,
  parseStreamParams,
  type StreamEnd,
  type StreamSink,
  withRateLimit,
} from "./stream.js";
