// Picks the service manager: systemd user units when `systemctl --user` reaches a user
// manager, else the daemon's own process backend.
import type { ProcessBackendOptions } from "./process-backend.js";
import { createProcessBackend } from "./process-backend.js";
import type { ServiceBackend } from "./service-backend.js";
import { systemdAvailable } from "./service-backend.js";
import type { SystemdBackendOptions } from "./systemd-backend.js";
import { createSystemdBackend } from "./systemd-backend.js";

export interface ChooseBackendOptions {
  /** `auto` (default) probes systemd; `systemd` and `process` force one. */
  prefer?: "auto" | "systemd" | "process";
  systemd?: SystemdBackendOptions;
  process?: ProcessBackendOptions;
}

export async function chooseServiceBackend(opts: ChooseBackendOptions = {}): Promise<ServiceBackend> {
  const prefer = opts.prefer ?? "auto";
  if (prefer === "systemd") return createSystemdBackend(opts.systemd);
  if (prefer === "auto" && (await systemdAvailable(opts.systemd?.systemctl, opts.systemd?.env))) {
    return createSystemdBackend(opts.systemd);
  }
  return createProcessBackend(opts.process);
}
