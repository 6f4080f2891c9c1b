// Help texts, built from the command table (light: no imports beyond the table).
import { COMMANDS, GLOBAL_OPTIONS, commandName, commandsUnder, type CommandSpec, type OptionSpec } from "./registry.js";

export const EXIT_CODES: [number, string][] = [
  [0, "success"],
  [1, "failure (the command ran and something went wrong)"],
  [2, "usage: unknown command or option, a missing or malformed argument, or input the tower refused as invalid"],
  [3, "not authenticated or not allowed (token missing, expired, revoked, or role too low)"],
  [4, "not found (no such domain, mission, task, agent, secret, token, …)"],
  [5, "conflict (the resource is not in a state that allows this, e.g. retrying a running task)"],
  [6, "rate limited"],
  [7, "unavailable (the tower or the daemon cannot be reached or is not ready)"],
];

function optionLine(o: OptionSpec): string {
  const flag =
    `${o.short ? `-${o.short}, ` : "    "}--${o.name}` + `${o.value ? ` ${o.value}` : ""}${o.multiple ? " …" : ""}`;
  return `  ${flag.padEnd(30)} ${o.desc}`;
}

export function commandHelp(spec: CommandSpec): string {
  const lines = [
    `${commandName(spec)} — ${spec.summary}`,
    "",
    `Usage: ${commandName(spec)}${spec.usage ? ` ${spec.usage}` : ""} [--json]`,
  ];
  if (spec.options?.length) lines.push("", "Options:", ...spec.options.map(optionLine));
  lines.push("", "Global options:", ...GLOBAL_OPTIONS.map(optionLine));
  lines.push("", "Example:", `  ${spec.example}`, "");
  return lines.join("\n");
}

export function groupHelp(words: string[]): string {
  const under = commandsUnder(words);
  const width = Math.max(...under.map((c) => commandName(c).length));
  return [
    `Commands under 'ep ${words.join(" ")}':`,
    "",
    ...under.map((c) => `  ${commandName(c).padEnd(width)}  ${c.summary}`),
    "",
    `Run 'ep ${words.join(" ")} <command> --help' for a command's options and an example.`,
    "",
  ].join("\n");
}

export function mainHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => commandName(c).length));
  return [
    "ep — the EP operator CLI (with no arguments on a terminal: the interactive console)",
    "",
    "Usage: ep <command> [options]",
    "",
    "Commands:",
    ...COMMANDS.map((c) => `  ${commandName(c).padEnd(width)}  ${c.summary}`),
    "",
    "Global options:",
    ...GLOBAL_OPTIONS.map(optionLine),
    "",
    "Environment: EP_BASE_URL (tower URL), EP_TOKEN (bearer token), EP_HOME (default ~/.ep), EP_NODE_FILE.",
    "Exit codes: " + EXIT_CODES.map(([n, d]) => `${n} ${d.split(" (")[0]}`).join(", ") + ".",
    "",
    "Example:",
    "  ep up                      # tower + daemon on this machine",
    "  ep domain create payments  # then: ep mission create --domain <id> 'Ship v2'",
    "",
  ].join("\n");
}
