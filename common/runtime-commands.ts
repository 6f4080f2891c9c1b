// The command each runtime kind runs unless runtimes.toml says otherwise (docs/runtimes.md). Shared
// by the daemon's runtimes.toml loader and `ep system doctor`, which reads the same file itself so
// it checks the binaries epd would really start (the CLI does not import daemon code).
import { parse } from "smol-toml";
import { EpError } from "./errors.js";

export const DEFAULT_RUNTIME_COMMANDS = {
  vendorA_code: "claude",
  vendorA_agent_acp: "claude-code-acp",
  vendorB: "codex",
  vendorC: "gemini",
  muxhost_hosted: "claude",
  shell: "bash",
} as const;

export type RuntimeCommandKind = keyof typeof DEFAULT_RUNTIME_COMMANDS;

/**
 * The command of each runtime kind: `[<kind>] command` of runtimes.toml text over the defaults
 * (undefined text = no file). Text that is not TOML is a config_invalid EpError naming the file.
 * Only the commands are read; the daemon validates the rest when it loads the file.
 */
export function runtimeCommands(
  tomlText: string | undefined,
  source = "runtimes.toml",
): Record<RuntimeCommandKind, string> {
  const out: Record<RuntimeCommandKind, string> = { ...DEFAULT_RUNTIME_COMMANDS };
  if (tomlText === undefined) return out;
  let doc: Record<string, unknown>;
  try {
    doc = parse(tomlText) as Record<string, unknown>;
  } catch (err) {
    throw new EpError("config_invalid", `${source}: not valid TOML: ${(err as Error).message.split("\n")[0]}`, {
      file: source,
    });
  }
  for (const kind of Object.keys(out) as RuntimeCommandKind[]) {
    const table = doc[kind];
    if (table === undefined) continue;
    const command =
      typeof table === "object" && table !== null && !Array.isArray(table)
        ? (table as Record<string, unknown>).command
        : undefined;
    if (command === undefined) continue;
    if (typeof command !== "string" || !command.trim())
      throw new EpError("config_invalid", `${source}: ${kind}.command must be a non-empty string`, {
        file: source,
        field: `${kind}.command`,
      });
    out[kind] = command;
  }
  return out;
}
