// ep: the operator CLI. A light dispatcher: it parses the words against the command table and
// loads only the module of the command being run (tower client, Ink and the rest stay unloaded).
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createContext, UsageError, type Context, type OptionValue } from "./context.js";
import { commandHelp, groupHelp, mainHelp } from "./help.js";
import {
  commandName,
  commandsUnder,
  findCommand,
  GLOBAL_OPTIONS,
  type CommandSpec,
  type ModuleName,
} from "./registry.js";

export interface CommandModule {
  // biome-ignore lint/suspicious/noConfusingVoidType: a command that returns nothing exits 0
  run(ctx: Context): Promise<number | void>;
}

// static strings so the bundler splits each group into its own chunk
const MODULES: Record<ModuleName, () => Promise<CommandModule>> = {
  node: () => import("./commands/node.js"),
  daemon: () => import("./commands/daemon.js"),
  mgmt: () => import("./commands/mgmt.js"),
  doctor: () => import("./commands/doctor.js"),
  work: () => import("./commands/work.js"),
  approvals: () => import("./commands/approvals.js"),
  ai: () => import("./commands/ai.js"),
  events: () => import("./commands/events.js"),
  secret: () => import("./commands/secret.js"),
  webhook: () => import("./commands/webhook.js"),
  token: () => import("./commands/token.js"),
  session: () => import("./commands/session.js"),
  meta: () => import("./commands/meta.js"),
  up: () => import("./commands/up.js"),
  attach: () => import("./commands/attach.js"),
  workspace: () => import("./commands/workspace.js"),
  changes: () => import("./commands/changes.js"),
  pipeline: () => import("./commands/pipeline.js"),
};

function version(): string {
  // dist/cli/main.js and cli/main.ts both sit two levels below the package root
  const pkg = fileURLToPath(new URL("../../package.json", import.meta.url));
  try {
    return (JSON.parse(readFileSync(pkg, "utf8")) as { version: string }).version;
  } catch {
    return "0.0.0";
  }
}

async function openTui(): Promise<number> {
  // the release build bundles Ink into dist/cli/tui.js (cli/build-tui.mjs); otherwise the split chunk
  const bundled = new URL("./tui.js", import.meta.url);
  const mod = (existsSync(fileURLToPath(bundled)) ? await import(bundled.href) : await import("./tui/run.js")) as {
    runTui(): Promise<number>;
  };
  return mod.runTui();
}

async function dispatch(argv: string[]): Promise<number> {
  if (argv.length === 0) {
    if (process.stdin.isTTY && process.stdout.isTTY) return openTui();
    process.stdout.write(mainHelp());
    return 0;
  }
  // global options may come before the command words too (`ep --json domain ls`, as in gh and
  // kubectl): they are moved behind the words before the command's own options are parsed
  const words: string[] = [];
  const globals: string[] = [];
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i];
    const name = a.startsWith("--") ? a.slice(2).split("=", 1)[0] : a === "-h" ? "help" : undefined;
    const global = name !== undefined ? GLOBAL_OPTIONS.find((o) => o.name === name) : undefined;
    if (global && words.length === 0 && name !== "help") {
      globals.push(a);
      if (global.type === "string" && !a.includes("=") && i + 1 < argv.length) globals.push(argv[++i]);
      continue;
    }
    if (a.startsWith("-")) break;
    words.push(a);
  }
  if (globals.length && words.length === 0)
    throw new UsageError("say which command: options like --json go with a command (see 'ep --help')");
  if (globals.length) argv = [...words, ...globals, ...argv.slice(i)];
  if (words[0] === "help") {
    const target = findCommand(words.slice(1));
    process.stdout.write(
      words.length === 1
        ? mainHelp()
        : target && target.used === words.length - 1
          ? commandHelp(target.spec)
          : groupHelp(words.slice(1)),
    );
    return 0;
  }
  const found = findCommand(words);
  if (
    !found ||
    (found.used < words.length && commandsUnder(words.slice(0, found.used)).length > 0 && found.spec.args === undefined)
  ) {
    return noCommand(argv, words);
  }
  const { spec, used } = found;
  const rest = argv.slice(used);
  const options = Object.fromEntries(
    [...GLOBAL_OPTIONS, ...(spec.options ?? [])].map((o) => [
      o.name,
      { type: o.type, multiple: o.multiple ?? false, ...(o.short ? { short: o.short } : {}) },
    ]),
  ) as NonNullable<Parameters<typeof parseArgs>[0]>["options"];
  let parsed: { values: Record<string, OptionValue>; positionals: string[] };
  try {
    parsed = parseArgs({ args: rest, options, allowPositionals: true, strict: true }) as typeof parsed;
  } catch (err) {
    throw Object.assign(
      new UsageError(`${(err as Error).message.replace(/\. To specify a positional argument.*$/s, "")}`),
      { hint: `see '${commandName(spec)} --help'` },
    );
  }
  if (parsed.values.help) {
    process.stdout.write(commandHelp(spec));
    return 0;
  }
  const min = spec.args?.min ?? 0;
  const max = spec.args?.max ?? (spec.args ? Infinity : 0);
  const usageHint = `usage: ${commandName(spec)} ${spec.usage}`.trimEnd() + `  (see '${commandName(spec)} --help')`;
  if (parsed.positionals.length < min)
    throw Object.assign(new UsageError(`${commandName(spec)} needs ${spec.usage.split(" [")[0] || "more arguments"}`), {
      hint: usageHint,
    });
  if (parsed.positionals.length > max) {
    const extra = parsed.positionals.slice(max);
    if (commandsUnder(spec.path).length) return noCommand(argv, [...spec.path, extra[0]]);
    throw Object.assign(new UsageError(`unexpected argument ${JSON.stringify(extra[0])} for ${commandName(spec)}`), {
      hint: usageHint,
    });
  }
  const ctx = createContext(spec, parsed.positionals, parsed.values);
  ctx.version = version();
  current = ctx;
  if (
    OPTIONS_WITH_NAMES.some(
      (o) => typeof parsed.values[o] === "string" && !/^(dom|msn|agt)_/.test(parsed.values[o] as string),
    )
  ) {
    await (await import("./names.js")).resolveNames(ctx);
  }
  const mod = await MODULES[spec.module]();
  return (await mod.run(ctx)) ?? 0;
}

function noCommand(argv: string[], words: string[]): number {
  const asGroup = commandsUnder(words);
  if (asGroup.length && words.length > 0) {
    // `ep agent cron` or `ep agent cron --help`: the group's commands
    const wantsHelp = argv.includes("--help") || argv.includes("-h");
    (wantsHelp ? process.stdout : process.stderr).write(groupHelp(words));
    return wantsHelp ? 0 : 2;
  }
  // the deepest group the words name (`ep task show tsk_1`: group `task`, unknown `show`)
  let depth = words.length - 1;
  while (depth > 0 && !commandsUnder(words.slice(0, depth)).length) depth--;
  if (depth === 0) throw new UsageError(`unknown command 'ep ${words.join(" ")}'`);
  const prefix = words.slice(0, depth);
  const names = [...new Set(commandsUnder(prefix).map((c) => c.path[depth]))];
  const asked = words[depth];
  const err = new UsageError(
    `unknown command 'ep ${[...prefix, asked].join(" ")}' ` +
      `(commands under 'ep ${prefix.join(" ")}': ${names.join(", ")})`,
  );
  const meant = SYNONYMS[asked];
  const hint =
    meant && names.includes(meant)
      ? `did you mean 'ep ${[...prefix, meant].join(" ")}'?`
      : `see 'ep ${prefix.join(" ")} --help'`;
  throw Object.assign(err, { hint });
}

/** Words other CLIs use for a command that has another name here. */
const SYNONYMS: Record<string, string> = {
  show: "get",
  view: "get",
  describe: "get",
  info: "get",
  inspect: "get",
  list: "ls",
  new: "create",
  add: "create",
};

let current: Context | undefined;

/** Options that take an id and accept a name too (cli/names.ts, loaded only when a name is given). */
const OPTIONS_WITH_NAMES = ["domain", "mission", "assignee", "agent"];

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv[0] === "--version" || (argv[0] === "-v" && argv.length === 1)) {
    process.stdout.write(`ep ${version()}\n`);
    return;
  }
  if (argv[0] === "--help" || argv[0] === "-h") {
    process.stdout.write(mainHelp());
    return;
  }
  try {
    process.exitCode = await dispatch(argv);
  } catch (err) {
    const { reportError } = await import("./fail.js");
    process.exitCode = await reportError(err, current, argv);
  }
}

// a reader that stopped reading (`ep task get … | head`) is not an error: stop quietly, as Unix tools do
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(process.exitCode ?? 0);
  throw err;
});

void main();

export type { CommandSpec };
