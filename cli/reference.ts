// The command reference of docs/cli.md, generated from the command table
// (cli/reference.test.ts fails when the doc and the table disagree).
import { EXIT_CODES } from "./help.js";
import { COMMANDS, GLOBAL_OPTIONS, commandName, type OptionSpec } from "./registry.js";

const opt = (o: OptionSpec) =>
  `\`${o.short ? `-${o.short}, ` : ""}--${o.name}${o.value ? ` ${o.value}` : ""}\`${o.multiple ? " (repeatable)" : ""}`;

export function renderReference(): string {
  const out: string[] = ["<!-- generated from cli/registry.ts by cli/reference.ts; do not edit by hand -->", ""];
  out.push("| command | what it does |", "|---|---|");
  for (const c of COMMANDS)
    out.push(`| \`${commandName(c)}${c.usage ? ` ${c.usage.replace(/\|/g, "\\|")}` : ""}\` | ${c.summary} |`);
  out.push("", "Global options (every command): " + GLOBAL_OPTIONS.map(opt).join(", ") + ".", "");
  for (const c of COMMANDS) {
    out.push(`### ${commandName(c)}`, "", c.summary.charAt(0).toUpperCase() + c.summary.slice(1) + ".", "");
    out.push("```", `${commandName(c)}${c.usage ? ` ${c.usage}` : ""}`, "```", "");
    if (c.options?.length) {
      for (const o of c.options) out.push(`- ${opt(o)}: ${o.desc}`);
      out.push("");
    }
    out.push(`Example: \`${c.example}\``, "");
  }
  out.push(
    "### Exit codes",
    "",
    "| code | meaning |",
    "|---|---|",
    ...EXIT_CODES.map(([n, d]) => `| ${n} | ${d} |`),
    "",
  );
  return out.join("\n");
}
