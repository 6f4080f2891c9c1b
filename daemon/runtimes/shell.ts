// shell: the task's `input.command` run by `bash -c`, for automation, demos and tests. Output is
// stdout; each line is a text frame; exit code 0 is success.
import type { Clock } from "../../common/clock.js";
import { invalidField } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { createProcessRuntime } from "./process-runtime.js";
import type { RuntimeAdapter } from "./runtime.js";
import type { CommandRuntimeConfig } from "./runtimes-config.js";
import type { SpawnFn } from "./spawner.js";

export function createShellRuntime(
  config: CommandRuntimeConfig,
  deps: { clock: Clock; logger: Logger; spawn?: SpawnFn },
): RuntimeAdapter {
  return createProcessRuntime({
    kind: "shell",
    config,
    ...deps,
    validate(spec) {
      const command = spec.input.command;
      if (command === undefined) return invalidField("input.command", "is required for the shell runtime");
      if (typeof command !== "string" || command.trim() === "")
        return invalidField("input.command", "must be a non-empty string");
      return undefined;
    },
  });
}
