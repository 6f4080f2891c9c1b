// vendorA_agent_acp: an ACP agent (default `claude-code-acp`) run for one task: initialize,
// session/new in the task's cwd, one session/prompt with the task's prompt; session updates
// become progress frames and the agent's message text is the output.
import { runEnv } from "./runtime.js";
import { acpErrorText } from "./acp-session.js";
import type { Clock, ClockTimer } from "../../common/clock.js";
import { EpError, invalidField } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { openAcpSession, type AcpSession } from "./acp-session.js";
import { fillArgs } from "./process-group.js";
import { asRecord, checkCommand, checkCwd, formatSeconds, settledHandle, templateValues } from "./process-runtime.js";
import { geminiSettingsFile } from "./vendor-c.js";
import { basename } from "node:path";
import type { ProgressFrame, RunHandle, RunResult, RunSpec, RuntimeAdapter } from "./runtime.js";
import type { AcpRuntimeConfig } from "./runtimes-config.js";

export function createVendorAAgentAcpRuntime(
  config: AcpRuntimeConfig,
  deps: { clock: Clock; logger: Logger },
): RuntimeAdapter {
  return {
    kind: "vendorA_agent_acp",
    check: (env = process.env) => checkCommand("vendorA_agent_acp", config.command, env),
    start(spec) {
      const err =
        checkCwd(spec) ??
        (spec.prompt.trim() === ""
          ? invalidField("prompt", "must not be empty for runtime vendorA_agent_acp")
          : undefined);
      if (err) return settledHandle({ ok: false, output: "", error: err.message, errorCode: err.code });
      return runAcp(spec, config, deps);
    },
  };
}

/**
 * The agent's environment. `gemini --acp` runs with a settings file of the run's own that turns its
 * interactive (pty) shell off: with it, gemini tells its ACP client nothing of a command's output,
 * so a write the confinement refused could not be in the task's denials.
 */
function acpEnv(config: AcpRuntimeConfig, spec: RunSpec): Record<string, string> {
  const env = runEnv(config.env, spec.env);
  if (basename(config.command) !== "gemini" || !spec.places) return env;
  const file = geminiSettingsFile(env, spec.places.runDir, (settings) => {
    const tools = asRecord(settings.tools) ?? {};
    settings.tools = { ...tools, shell: { ...asRecord(tools.shell), enableInteractiveShell: false } };
  });
  return file instanceof EpError ? env : { ...env, GEMINI_CLI_SYSTEM_SETTINGS_PATH: file };
}

function runAcp(spec: RunSpec, config: AcpRuntimeConfig, deps: { clock: Clock; logger: Logger }): RunHandle {
  const { clock } = deps;
  const graceMs = config.killGraceSeconds * 1000;
  const timeoutMs = spec.timeoutMs ?? config.timeoutSeconds * 1000;
  let session: AcpSession | undefined;
  let stop: { cancelled?: true; timedOut?: true; error: string } | undefined;
  let text = "";
  let timer: ClockTimer | undefined;
  // Read through a function: cancel() changes `stop` while run() awaits, which narrowing cannot see.
  const stopState = () => stop;

  const onFrame = (frame: ProgressFrame) => {
    // the reply's chunks (a thought's are marked `thought`)
    if (frame.kind === "text" && frame.data?.delta === true && !frame.data.thought) text += frame.text;
    spec.onFrame(frame);
  };

  const halt = (reason: NonNullable<typeof stop>) => {
    if (stop) return;
    stop = reason;
    if (!session) return;
    const s = session;
    // Ask politely first; an agent that does not end the turn within the grace is killed.
    void s.cancelTurn();
    clock.setTimeout(() => void s.close(), graceMs);
  };

  const run = async (): Promise<RunResult> => {
    try {
      session = await openAcpSession({
        command: config.command,
        args: fillArgs(config.args, templateValues(spec)),
        cwd: spec.cwd,
        env: acpEnv(config, spec),
        permission: spec.permission ?? config.permission ?? "workspace",
        confinement: {
          permission: spec.permission ?? config.permission,
          ...(spec.places ? { places: spec.places } : {}),
        },
        ...(spec.mcp ? { mcp: spec.mcp } : {}),
        askPermission: spec.askPermission,
        permissionTimeoutMs: config.permissionTimeoutSeconds * 1000,
        killGraceMs: graceMs,
        clock,
        logger: deps.logger.child({ task_id: spec.taskId }),
        onFrame,
      });
    } catch (err) {
      const e =
        err instanceof EpError ? err : new EpError("internal", `runtime vendorA_agent_acp: ${acpErrorText(err, "")}`);
      return { ok: false, output: "", error: e.message, errorCode: e.code };
    }
    if (stop) {
      await session.close();
      return { ok: false, output: "", ...stop };
    }
    try {
      const turn = await session.prompt(spec.prompt);
      const output = turn.text || text;
      const stopped = stopState();
      const usage = {
        ...(turn.usage ? { usage: turn.usage } : {}),
        ...(turn.denials.length ? { denials: turn.denials } : {}),
      };
      if (stopped) return { ok: false, output, ...usage, ...stopped };
      if (turn.stopReason === "end_turn") return { ok: true, output, ...usage };
      return {
        ok: false,
        output,
        ...usage,
        error: `vendorA_agent_acp: the agent stopped the turn: ${turn.stopReason}`,
      };
    } catch (err) {
      const stopped = stopState();
      if (stopped) return { ok: false, output: text, ...stopped };
      return { ok: false, output: text, error: `vendorA_agent_acp: ${acpErrorText(err, session.stderrTail())}` };
    } finally {
      await session.close();
    }
  };

  if (timeoutMs > 0) {
    timer = clock.setTimeout(
      () =>
        halt({
          timedOut: true,
          error: `runtime vendorA_agent_acp: timed out after ${formatSeconds(timeoutMs)}; the process group was killed`,
        }),
      timeoutMs,
    );
  }
  const result = run().finally(() => {
    if (timer) clock.clearTimeout(timer);
  });
  return {
    get pid() {
      return session?.pid;
    },
    result,
    cancel(reason) {
      halt({ cancelled: true, error: `cancelled${reason ? `: ${reason}` : ""}` });
      return result;
    },
  };
}
