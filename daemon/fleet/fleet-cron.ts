// The node's cron.toml jobs inside the fleet: `signal` jobs go through the fleet's one signal
// path, `bash` jobs run in the daemon home; every fire is a `matrix` event, and the fire history
// on disk is redacted first.
import { join } from "node:path";
import {
  createCronDispatcher,
  createFileCronStore,
  createJobDispatch,
  type CronFire,
  type CronStore,
} from "../cron/index.js";
import type { FleetCore } from "./fleet-core.js";
import type { ConfigReloadError } from "./fleet-types.js";

export function createFleetCron(
  core: FleetCore,
  hooks: { signal(session: string, prompt: string): Promise<string>; changed(): void },
) {
  const { clock, log, home, redaction } = core;
  const file = join(home, "cron.toml");
  const fileStore: CronStore = createFileCronStore(join(home, "cron-state.json"), { log });
  const store: CronStore = redaction
    ? { ...fileStore, record: (fire) => fileStore.record(redaction.deep(fire)) }
    : fileStore;
  const cron = createCronDispatcher({
    clock,
    log: log.child({ part: "cron" }),
    store,
    file,
    tickMs: core.settings.cronTickMs,
    dispatch: createJobDispatch({
      signal: async (job) => {
        const via = await hooks.signal(job.session, job.prompt);
        return { status: "ok", output: `delivered to ${job.session} via ${via}` };
      },
      bash: { env: { ...core.deps.baseEnv }, cwd: home, timeoutMs: 10 * 60_000 },
    }),
    onFire: (fire: CronFire) => {
      hooks.changed();
      core.publish({ type: "matrix", name: "cron.fired", status: fire.status, payload: firePayload(fire) });
    },
  });
  const errors = (): ConfigReloadError[] =>
    cron.loadErrors().map((e) => ({ file, line: e.line, field: e.field ?? "", item: e.job ?? "", message: e.message }));
  return { cron, store, file, errors };
}

function firePayload(fire: CronFire) {
  return {
    job: fire.job,
    slot: fire.slot,
    fired_at: fire.firedAt,
    status: fire.status,
    ...(fire.exitCode !== undefined ? { exit_code: fire.exitCode } : {}),
    ...(fire.error ? { error: fire.error } : {}),
    ...(fire.output ? { output: fire.output.slice(-2048) } : {}),
  };
}
