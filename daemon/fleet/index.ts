// Public surface of the fleet: profile agents (agents.toml), the signal path, supervision and cron wiring.
export type { AgentsFileError, AgentsFileResult, FleetProfile } from "./agents-file.js";
export {
  AGENT_FIELDS,
  agentsFileError,
  formatAgentsFileError,
  parseAgentsFile,
  readAgentsFile,
} from "./agents-file.js";
export type { EventPublisher, FleetEvent } from "./events.js";
export { createEventPublisher } from "./events.js";
export type { AcpHost, HostedAgent, HostMode, TmuxHost } from "./hosts.js";
export { createAcpHost, createFleetBackend, createTmuxHost } from "./hosts.js";
export type { Delivery, Fleet, FleetDeps, ProfileView, SignalSource } from "./fleet.js";
export { createFleet } from "./fleet.js";
export { cronFireMsg, cronJobMsg, fleetRoutes, profileMsg } from "./routes.js";
export type { FleetSettings } from "./settings.js";
export { fleetSettings } from "./settings.js";
