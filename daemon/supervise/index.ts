// Public surface of supervision: service backends and the watchdog.
export type { ServiceBackend, SupervisedAgent } from "./service-backend.js";
export { resolveExecutable, systemdAvailable, validateAgent } from "./service-backend.js";
export type { ProcessBackendOptions } from "./process-backend.js";
export { createProcessBackend } from "./process-backend.js";
export type { SystemdBackendOptions, UnitOptions } from "./systemd-backend.js";
export { createSystemdBackend, renderSystemdUnit, unitName } from "./systemd-backend.js";
export type { ChooseBackendOptions } from "./choose-backend.js";
export { chooseServiceBackend } from "./choose-backend.js";
export type {
  SupervisedState,
  SupervisedStatus,
  Watchdog,
  WatchdogAction,
  WatchdogEvent,
  WatchdogOptions,
} from "./watchdog.js";
export { createWatchdog } from "./watchdog.js";
