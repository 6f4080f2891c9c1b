// Reloading the node's configuration files (the tower's ReloadNodeConfig, `ep node reload`):
// cron.toml, runtimes.toml, then agents.toml — an invalid file keeps what runs, and every
// problem is reported with its file, line and field. Ends with a `config.reload` event.
import type { JsonObject } from "@bufbuild/protobuf";
import { join } from "node:path";
import { toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import type { CronDispatcher } from "../cron/index.js";
import { readAgentsFile, type AgentsFileError, type FleetProfile } from "./agents-file.js";
import type { FleetEvent } from "./events.js";
import type { ConfigReloadError, ConfigReloadResult } from "./fleet-types.js";

/** An EpError from a config file as reload errors: per-problem details when it has them. */
export function fileErrors(file: string, err: unknown): ConfigReloadError[] {
  const e = toEpError(err);
  const d = (e.details ?? {}) as Record<string, unknown>;
  const list = Array.isArray(d.errors) ? (d.errors as Record<string, unknown>[]) : [];
  if (list.length) {
    return list.map((x) => ({
      file,
      line: typeof x.line === "number" ? x.line : 0,
      field: String(x.field ?? x.key ?? ""),
      item: String(x.job ?? x.agent ?? ""),
      message: String(x.message ?? ""),
    }));
  }
  return [
    {
      file,
      line: typeof d.line === "number" ? d.line : 0,
      field: typeof d.field === "string" ? d.field : "",
      item: "",
      message: e.message,
    },
  ];
}

export interface ConfigReloadDeps {
  home: string;
  log: Logger;
  cron: CronDispatcher;
  cronFile: string;
  agentsFile: string;
  reloadRuntimes?: () => Promise<void>;
  setAgentsErrors(errors: AgentsFileError[]): void;
  agentsErrors(): ConfigReloadError[];
  /** starts, stops and restarts profiles to match the new list; its one-line result */
  applyProfiles(next: FleetProfile[]): Promise<string>;
  publish(e: FleetEvent): void;
  /** the node state changed (the tower's view is refreshed) */
  changed(): void;
}

export function createConfigReload(d: ConfigReloadDeps) {
  const nErrors = (n: number) => (n === 1 ? "1 error" : `${n} errors`);
  return async function reloadConfig(opts: { requestId?: string; source?: string } = {}): Promise<ConfigReloadResult> {
    const results: string[] = [];
    const problems: ConfigReloadError[] = [];
    // cron.toml: an invalid file keeps the running jobs
    try {
      results.push(`cron.toml: ${d.cron.reload().jobs} jobs`);
    } catch (err) {
      const found = fileErrors(d.cronFile, err);
      problems.push(...found);
      results.push(`cron.toml: ${nErrors(found.length)}; the running jobs were kept`);
    }
    // agents.toml: an invalid file keeps the running profiles; a valid one is applied after
    // runtimes.toml (below), so new and changed profiles start with the new runtime settings
    const again = readAgentsFile(d.agentsFile);
    let agentsResult: string | (() => Promise<string>);
    if (!again.ok) {
      d.setAgentsErrors(again.errors);
      problems.push(...d.agentsErrors());
      agentsResult = `agents.toml: ${nErrors(again.errors.length)}; the running profiles were kept`;
    } else {
      d.setAgentsErrors([]);
      const next = again.profiles;
      agentsResult = () => d.applyProfiles(next);
    }
    const agentsAt = results.push("") - 1;
    // runtimes.toml: new runs use the new commands, runs already going keep theirs
    if (d.reloadRuntimes) {
      try {
        await d.reloadRuntimes();
        results.push("runtimes.toml: reloaded");
      } catch (err) {
        const found = fileErrors(join(d.home, "runtimes.toml"), err);
        problems.push(...found);
        results.push(`runtimes.toml: ${nErrors(found.length)}; the running runtime settings were kept`);
      }
    } else {
      results.push("runtimes.toml: not reloadable in this daemon");
    }
    results[agentsAt] = typeof agentsResult === "string" ? agentsResult : await agentsResult();
    const status = problems.length ? "failed" : "ok";
    (status === "ok" ? d.log.info : d.log.warn).call(d.log, "configuration reloaded", {
      status,
      results,
      errors: problems,
    });
    d.publish({
      type: "matrix",
      name: "config.reload",
      status,
      payload: {
        ...(opts.requestId ? { request_id: opts.requestId } : {}),
        source: opts.source ?? "cli",
        status,
        results,
        errors: problems as unknown as JsonObject[],
      },
    });
    d.changed();
    return { status, results, errors: problems };
  };
}
