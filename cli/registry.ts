// The command table of `ep`: every command's words, options, help and the module that runs it.
// This file is loaded on every start, so it holds data only and imports only data: the types and
// shared options (command-spec.ts), the work group (registry-work.ts) and the events and webhooks
// group (registry-events.ts).
import { domainOpt, type CommandSpec, type OptionSpec } from "./command-spec.js";
import { EVENT_COMMANDS } from "./registry-events.js";
import { WORK_COMMANDS } from "./registry-work.js";

export type { CommandSpec, ModuleName, OptionSpec } from "./command-spec.js";

export const GLOBAL_OPTIONS: OptionSpec[] = [
  { name: "json", type: "boolean", desc: "print JSON instead of a table" },
  {
    name: "wide",
    type: "boolean",
    desc: "tables: add the ids (dom_…, msn_…, agt_…, ses_…) beside the names they show",
  },
  { name: "url", type: "string", value: "<url>", desc: "tower URL (default $EP_BASE_URL or http://localhost:8008)" },
  {
    name: "token",
    type: "string",
    value: "<token>",
    desc: "bearer token (default $EP_TOKEN, then the saved credentials)",
  },
  { name: "help", type: "boolean", short: "h", desc: "show help for the command" },
  { name: "version", type: "boolean", desc: "print the version" },
];

export const COMMANDS: CommandSpec[] = [
  // --- seed commands: node, daemon, agents on this node ---
  {
    path: ["agent", "node", "register"],
    summary: "register this machine with the tower and write its node identity file",
    usage: "--hostname <hostname> [--domain <id|name>]…",
    example: "sudo ep agent node register --hostname worker-1 --domain demo",
    module: "node",
    options: [
      { name: "hostname", type: "string", value: "<hostname>", desc: "name of this node (required)" },
      {
        name: "domain",
        type: "string",
        multiple: true,
        value: "<id|name>",
        desc: "a domain this node serves (repeatable); without it the node serves all domains (*)",
      },
    ],
  },
  {
    path: ["daemon"],
    summary: "configure the node daemon (--booster-wasm records the planner booster for epd)",
    usage: "--booster-wasm <path>",
    example: "ep daemon --booster-wasm ./my-booster.wasm && ep daemon down && ep daemon up",
    module: "daemon",
    options: [
      {
        name: "booster-wasm",
        type: "string",
        value: "<path>",
        desc: "Wasm booster run before every MCP tool call (written to $EP_HOME/epd.env)",
      },
    ],
  },
  {
    path: ["daemon", "up"],
    summary: "start epd as a systemd user service (or detached with a pid file when systemd is absent)",
    usage: "[--booster-wasm <path>] [--no-systemd] [--unit-only]",
    example: "ep daemon up",
    module: "daemon",
    options: [
      { name: "booster-wasm", type: "string", value: "<path>", desc: "record a booster for epd before starting" },
      { name: "no-systemd", type: "boolean", desc: "start epd detached even when systemd is available" },
      { name: "unit-only", type: "boolean", desc: "write the unit and epd.env, start nothing" },
    ],
  },
  { path: ["daemon", "down"], summary: "stop epd", usage: "", example: "ep daemon down", module: "daemon" },
  {
    path: ["daemon", "status"],
    summary: "show whether epd runs and what it reports on mgmt.sock",
    usage: "",
    example: "ep daemon status --json",
    module: "daemon",
  },
  {
    path: ["daemon", "logs"],
    summary: "show epd's log",
    usage: "[-n <lines>] [--follow]",
    example: "ep daemon logs -n 50 --follow",
    module: "daemon",
    options: [
      { name: "lines", short: "n", type: "string", value: "<lines>", desc: "how many lines (default 100)" },
      { name: "follow", short: "f", type: "boolean", desc: "keep printing new lines" },
    ],
  },
  {
    path: ["daemon", "agent", "enroll"],
    summary: "enroll an agent on this node (through mgmt.sock)",
    usage: "--domain <id> --runtime <runtime> [--capability <cap>]… [--name <name>]",
    example: "ep daemon agent enroll --domain dom_01 --runtime shell --capability bash --name builder",
    module: "mgmt",
    options: [
      domainOpt,
      {
        name: "runtime",
        type: "string",
        value: "<runtime>",
        desc: "vendorA_code, vendorA_agent_acp, vendorB, vendorC, muxhost_hosted or shell",
      },
      { name: "capability", type: "string", multiple: true, value: "<cap>", desc: "a capability (repeatable)" },
      {
        name: "name",
        type: "string",
        value: "<name>",
        desc: "agent / profile name (default: the tower names it <runtime>-<n>, the lowest n free on this node)",
      },
    ],
  },
  {
    path: ["run"],
    summary: "run an MCP tool through the local daemon (validated, boosted, forwarded to the tower)",
    usage: "<tool> --domain <id> [--arg k=v]… [--args-json '{…}']",
    example: "ep run submit_mesh_task --domain dom_01 --arg mission_id=msn_01 --arg title='build it'",
    module: "mgmt",
    args: { min: 1 },
    options: [
      domainOpt,
      {
        name: "arg",
        type: "string",
        multiple: true,
        value: "k=v",
        desc: "a tool argument (repeatable; values that parse as JSON are JSON)",
      },
      { name: "args-json", type: "string", value: "<json>", desc: "all arguments as one JSON object" },
    ],
  },
  {
    path: ["agent", "signal"],
    summary: "deliver a prompt to a profile agent on this node",
    usage: "<profile> <prompt>",
    example: "ep agent signal ops 'check the nightly build'",
    module: "mgmt",
    args: { min: 2 },
  },
  {
    path: ["agent", "attach"],
    summary: "attach this terminal to an agent's PTY (local epd.sock, else through the tower); Ctrl-] detaches",
    usage: "<id> [--read-only] [--tower] [--detach-key ctrl-<c>]",
    example: "ep agent attach agt_01",
    module: "attach",
    args: { min: 1 },
    options: [
      { name: "read-only", type: "boolean", desc: "watch only: keystrokes are not sent" },
      { name: "tower", type: "boolean", desc: "go through the tower even when the agent runs on this node" },
      { name: "detach-key", type: "string", value: "ctrl-<c>", desc: "key that detaches (default ctrl-])" },
    ],
  },
  {
    path: ["agent", "cron", "list"],
    summary: "list cron jobs and their next fire time",
    usage: "",
    example: "ep agent cron list --json",
    module: "mgmt",
  },
  {
    path: ["agent", "cron", "describe"],
    summary: "show a job's full config and last fire",
    usage: "<name>",
    example: "ep agent cron describe nightly",
    module: "mgmt",
    args: { min: 1 },
  },
  {
    path: ["agent", "cron", "history"],
    summary: "show recent fires of a job",
    usage: "<name> [--limit <n>]",
    example: "ep agent cron history nightly --limit 5",
    module: "mgmt",
    args: { min: 1 },
    options: [{ name: "limit", type: "string", value: "<n>", desc: "how many fires (default: the daemon's)" }],
  },
  {
    path: ["agent", "cron", "reload"],
    summary: "re-read cron.toml without restarting the daemon",
    usage: "",
    example: "ep agent cron reload",
    module: "mgmt",
  },
  {
    path: ["agent", "cron", "gc-now"],
    summary: "drop stale dedup entries now",
    usage: "",
    example: "ep agent cron gc-now",
    module: "mgmt",
  },
  {
    path: ["agent", "supervise", "list"],
    summary: "list supervised agents",
    usage: "",
    example: "ep agent supervise list",
    module: "mgmt",
  },
  {
    path: ["agent", "supervise", "status"],
    summary: "show one supervised agent",
    usage: "<id>",
    example: "ep agent supervise status agt_01",
    module: "mgmt",
    args: { min: 1 },
  },
  {
    path: ["agent", "supervise", "restart"],
    summary: "restart an agent",
    usage: "<id>",
    example: "ep agent supervise restart agt_01",
    module: "mgmt",
    args: { min: 1 },
  },
  {
    path: ["agent", "supervise", "pause"],
    summary: "turn auto-restart off",
    usage: "<id>",
    example: "ep agent supervise pause agt_01",
    module: "mgmt",
    args: { min: 1 },
  },
  {
    path: ["agent", "supervise", "resume"],
    summary: "turn auto-restart back on",
    usage: "<id>",
    example: "ep agent supervise resume agt_01",
    module: "mgmt",
    args: { min: 1 },
  },
  {
    path: ["system", "doctor"],
    summary: "check the tower, node identity, daemon sockets, runtimes and clock; --fix repairs local setup",
    usage: "[--fix]",
    example: "ep system doctor --json",
    module: "doctor",
    options: [{ name: "fix", type: "boolean", desc: "create EP_HOME and EP_SKILLS_HOME and seed $EP_HOME/agent_id" }],
  },
  ...WORK_COMMANDS,
  // --- approvals and the AI console ---
  {
    path: ["approvals", "ls"],
    summary: "list what waits for a person: agents' tool-permission requests and AI sessions' pending actions",
    usage: "",
    example: "ep approvals ls",
    module: "approvals",
  },
  {
    path: ["approvals", "approve"],
    summary: "allow an agent's tool call (an apr_ id), or approve and so execute an AI session's pending action",
    usage: "<approval> [--option <id>] | [<session>] <action>",
    example: "ep approvals approve apr_01 --option allow_always",
    module: "approvals",
    args: { min: 1, max: 2 },
    options: [
      {
        name: "option",
        type: "string",
        value: "<id>",
        desc: "which of the agent's allow options (e.g. its 'always allow'); default allow once",
      },
    ],
  },
  {
    path: ["approvals", "reject"],
    summary: "refuse an agent's tool call (the agent goes on without it), or reject an AI session's pending action",
    usage: "<approval> [--reason <text>] | [<session>] <action>",
    example: "ep approvals reject apr_01 --reason 'not on main'",
    module: "approvals",
    args: { min: 1, max: 2 },
    options: [{ name: "reason", type: "string", value: "<text>", desc: "why, shown to whoever looks at the approval" }],
  },
  {
    path: ["ai", "chat"],
    summary: "talk to an AI console session (one message, or a prompt loop without one)",
    usage: "[<message>] [--session <id>]",
    example: "ep ai chat 'list the failed tasks of mission msn_01'",
    module: "ai",
    args: { min: 0, max: 1 },
    options: [{ name: "session", type: "string", value: "<id>", desc: "continue this session (default: a new one)" }],
  },
  ...EVENT_COMMANDS,
  // --- secrets and tokens ---
  {
    path: ["secret", "set"],
    summary: "store a secret (value from stdin or a hidden prompt, never an argument)",
    usage: "<name> [--domain <id>]",
    example: 'printf %s "$DB_PASSWORD" | ep secret set DB_PASSWORD --domain dom_01',
    module: "secret",
    args: { min: 1 },
    options: [domainOpt],
  },
  {
    path: ["secret", "ls"],
    summary: "list secrets (names and grants, never values)",
    usage: "",
    example: "ep secret ls",
    module: "secret",
  },
  {
    path: ["secret", "rm"],
    summary: "delete a secret",
    usage: "<name>",
    example: "ep secret rm DB_PASSWORD",
    module: "secret",
    args: { min: 1 },
  },
  {
    path: ["secret", "grant"],
    summary: "let an agent or a whole domain read a secret",
    usage: "<name> --agent <id> | --domain <id>",
    example: "ep secret grant DB_PASSWORD --agent agt_01",
    module: "secret",
    args: { min: 1 },
    options: [{ name: "agent", type: "string", value: "<id>", desc: "agent id" }, domainOpt],
  },
  {
    path: ["secret", "revoke"],
    summary: "withdraw a grant",
    usage: "<name> --agent <id> | --domain <id>",
    example: "ep secret revoke DB_PASSWORD --agent agt_01",
    module: "secret",
    args: { min: 1 },
    options: [{ name: "agent", type: "string", value: "<id>", desc: "agent id" }, domainOpt],
  },
  {
    path: ["token", "create"],
    summary: "create a service-account token (the secret is shown once)",
    usage: "--name <name> --role <role> [--domain <id>] [--ttl <dur>]",
    example: "ep token create --name ci --role operator --ttl 30d",
    module: "token",
    options: [
      { name: "name", type: "string", value: "<name>", desc: "a name to recognise it by (required)" },
      { name: "role", type: "string", value: "<role>", desc: "admin, operator, viewer or agent (required)" },
      domainOpt,
      { name: "ttl", type: "string", value: "<dur>", desc: "lifetime like 3600s, 90m, 12h, 30d (default: no expiry)" },
    ],
  },
  { path: ["token", "ls"], summary: "list tokens", usage: "", example: "ep token ls", module: "token" },
  {
    path: ["token", "revoke"],
    summary: "revoke a token",
    usage: "<id>",
    example: "ep token revoke tok_01",
    module: "token",
    args: { min: 1 },
  },
  // --- session, meta, one-machine mode ---
  {
    path: ["login"],
    summary: "check a token against the tower and save it for later commands",
    usage: "--url <url> --token <token>",
    example: "ep login --url https://tower.example.com --token ept_…",
    module: "session",
  },
  { path: ["logout"], summary: "forget the saved credentials", usage: "", example: "ep logout", module: "session" },
  { path: ["whoami"], summary: "show who the current token is", usage: "", example: "ep whoami", module: "session" },
  { path: ["version"], summary: "print the version", usage: "", example: "ep version --json", module: "meta" },
  {
    path: ["completion"],
    summary: "print a shell completion script",
    usage: "bash|zsh|fish",
    example: "ep completion bash > /etc/bash_completion.d/ep",
    module: "meta",
    args: { min: 1 },
  },
  {
    path: ["ui"],
    summary: "print the console's address and a fresh one-time login link (valid 24 h)",
    usage: "",
    example: "ep ui",
    module: "up",
  },
  {
    path: ["up"],
    summary: "one-machine mode: the tower on 127.0.0.1:8008, this machine as a node, a local epd",
    usage: "[--listen <host:port>] [--no-daemon]",
    example: "ep up",
    module: "up",
    options: [
      { name: "listen", type: "string", value: "<host:port>", desc: "tower address (default 127.0.0.1:8008)" },
      { name: "no-daemon", type: "boolean", desc: "run the tower only" },
    ],
  },
];

/** The command whose words are the longest prefix of `words`, and how many words it used. */
export function findCommand(words: string[]): { spec: CommandSpec; used: number } | undefined {
  let best: { spec: CommandSpec; used: number } | undefined;
  for (const spec of COMMANDS) {
    const n = spec.path.length;
    if (n > words.length || (best && best.used >= n)) continue;
    if (spec.path.every((w, i) => words[i] === w)) best = { spec, used: n };
  }
  return best;
}

/** Commands under a group of words (for `ep agent` or `ep agent cron`). */
export function commandsUnder(words: string[]): CommandSpec[] {
  return COMMANDS.filter((c) => c.path.length > words.length && words.every((w, i) => c.path[i] === w));
}

export function commandName(spec: CommandSpec): string {
  return ["ep", ...spec.path].join(" ");
}
