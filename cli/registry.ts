// The command table of `ep`: every command's words, options, help and the module that runs it.
// This file is loaded on every start, so it holds data only and imports only data: the types and
// shared options (command-spec.ts) and the events and webhooks group (registry-events.ts).
import { domainOpt, type CommandSpec, type OptionSpec } from "./command-spec.js";
import { EVENT_COMMANDS } from "./registry-events.js";

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
  // --- the tower: work ---
  { path: ["domain", "ls"], summary: "list domains", usage: "", example: "ep domain ls", module: "work" },
  {
    path: ["domain", "create"],
    summary: "create a domain",
    usage: "<name>",
    example: "ep domain create payments",
    module: "work",
    args: { min: 1 },
  },
  {
    path: ["mission", "ls"],
    summary: "list missions",
    usage: "[--domain <id>]",
    example: "ep mission ls --domain dom_01",
    module: "work",
    options: [{ ...domainOpt, desc: "only this domain (default: every domain)" }],
  },
  {
    path: ["mission", "get"],
    summary: "show a mission and the tokens and cost its tasks used so far",
    usage: "<id|title>",
    example: "ep mission get msn_01",
    module: "work",
    args: { min: 1, max: 1 },
  },
  {
    path: ["mission", "create"],
    summary: "create a mission",
    usage: "--domain <id> <title>",
    example: "ep mission create --domain dom_01 'Ship v2'",
    module: "work",
    args: { min: 1 },
    options: [domainOpt, { name: "description", type: "string", value: "<text>", desc: "longer description" }],
  },
  {
    path: ["task", "ls"],
    summary: "list tasks of a mission",
    usage: "--mission <id> [--status <s>] [--kind claimable|assigned]",
    example: "ep task ls --mission msn_01 --status failed",
    module: "work",
    options: [
      { name: "mission", type: "string", value: "<id>", desc: "mission id (required)" },
      { name: "status", type: "string", value: "<status>", desc: "only tasks in this state" },
      { name: "kind", type: "string", value: "<kind>", desc: "claimable or assigned" },
    ],
  },
  {
    path: ["task", "submit"],
    summary: "submit a claimable task to a mission",
    usage:
      "--mission <id|title> <title> [--priority <n>] [--capability <c>]… " +
      "[--claim-policy <p>] [--assignee <agent>] [--runtime <r>] [--command <sh>] " +
      "[--workspace <repo> [--ref <ref>] [--branch <name>]] [--after <task>]… [--wait]",
    example:
      "ep task submit --mission msn_01 'run the tests' --runtime shell --command 'npm test' --after build --wait",
    module: "work",
    args: { min: 1 },
    options: [
      { name: "mission", type: "string", value: "<id|title>", desc: "mission id or title (required)" },
      { name: "description", type: "string", value: "<text>", desc: "longer description" },
      { name: "priority", type: "string", value: "<n>", desc: "32-bit integer, higher first (default 0)" },
      { name: "capability", type: "string", multiple: true, value: "<cap>", desc: "required capability (repeatable)" },
      { name: "claim-policy", type: "string", value: "<policy>", desc: "first_claim (default), assigned or broadcast" },
      { name: "assignee", type: "string", value: "<agent>", desc: "agent id for --claim-policy assigned" },
      { name: "runtime", type: "string", value: "<runtime>", desc: "runtime that must run it" },
      { name: "command", type: "string", value: "<sh>", desc: "input.command for the shell runtime" },
      {
        name: "prompt",
        type: "string",
        value: "<text>",
        desc: "input.prompt for an agent runtime (default: the title and description)",
      },
      {
        name: "workspace",
        type: "string",
        value: "<repo>",
        desc:
          "run in a git worktree of this repository: an absolute path on the node " +
          "or a name from workspaces.toml (input.workspace; docs/workspaces.md)",
      },
      {
        name: "ref",
        type: "string",
        value: "<ref>",
        desc: "with --workspace: the base commit, branch or tag (default: the workspace's ref, else HEAD)",
      },
      {
        name: "branch",
        type: "string",
        value: "<name>",
        desc: "with --workspace: the run's branch (default ep/<task_id>)",
      },
      { name: "max-attempts", type: "string", value: "<n>", desc: "attempts before the task fails (default 3)" },
      {
        name: "after",
        type: "string",
        multiple: true,
        value: "<task>",
        desc:
          "wait for this task to succeed first (repeatable; a tsk_ id, or a step name or title in the " +
          "mission): the task waits, then is queued; cancelled if that task fails (docs/pipelines.md)",
      },
      {
        name: "wait",
        type: "boolean",
        desc:
          "wait until the task ends (following its events) and print its output (exit 1 when it failed or " +
          "was cancelled; tool calls the agent was refused are listed on stderr and leave the exit code alone)",
      },
    ],
  },
  {
    path: ["task", "watch"],
    summary: "follow a task live: progress as the agent works, then the output (exit 1 if it fails)",
    usage: "<id> [--stderr]",
    example: "ep task watch tsk_01",
    module: "work",
    args: { min: 1, max: 1 },
    options: [
      { name: "stderr", type: "boolean", desc: "print the runtime's stderr lines (by default a line counts them)" },
    ],
  },
  {
    path: ["task", "get"],
    summary: "show a task and its result",
    usage: "<id>",
    example: "ep task get tsk_01 --json",
    module: "work",
    args: { min: 1 },
  },
  {
    path: ["task", "diff"],
    summary: "show what a task's run changed in its workspace: the stat and the patch (colored on a terminal)",
    usage: "<id> [--stat]",
    example: "ep task diff tsk_01 | less -R",
    module: "changes",
    args: { min: 1 },
    options: [{ name: "stat", type: "boolean", desc: "only the diff --stat summary" }],
  },
  {
    path: ["task", "merge"],
    summary:
      "merge a succeeded task's branch into its base branch on the node that " +
      "ran it: a fast-forward, else a merge commit; a conflict or a dirty " +
      "checkout is refused with the files named and nothing changed (exit 5)",
    usage: "<id> [--into <branch>]",
    example: "ep task merge tsk_01",
    module: "changes",
    args: { min: 1, max: 1 },
    options: [
      {
        name: "into",
        type: "string",
        value: "<branch>",
        desc: "the branch to merge into (default: the branch the task's worktree was made from)",
      },
    ],
  },
  {
    path: ["workspace", "ls"],
    summary: "list the git worktrees epd made on this node for tasks (active runs and kept failures)",
    usage: "",
    example: "ep workspace ls --json",
    module: "workspace",
  },
  {
    path: ["workspace", "rm"],
    summary: "remove a kept worktree (its branch stays unless --delete-branch)",
    usage: "<task_id> [--delete-branch]",
    example: "ep workspace rm tsk_01 --delete-branch",
    module: "workspace",
    args: { min: 1 },
    options: [{ name: "delete-branch", type: "boolean", desc: "also delete the run's branch (ep/<task_id>)" }],
  },
  {
    path: ["workspace", "gc"],
    summary: "remove kept worktrees older than their workspace's keep_failed (default 7d)",
    usage: "[--all]",
    example: "ep workspace gc --all",
    module: "workspace",
    options: [{ name: "all", type: "boolean", desc: "remove every kept worktree, whatever its age" }],
  },
  {
    path: ["pipeline", "run"],
    summary:
      "create a mission's tasks from a pipeline file of steps (depends_on, prompts or commands, workspaces) in one go",
    usage: "<file> --domain <id|name> [--mission <id|title>] [--title <text>] [--wait]",
    example: "ep pipeline run pipeline.toml --domain demo --wait",
    module: "pipeline",
    args: { min: 1, max: 1 },
    options: [
      {
        name: "domain",
        type: "string",
        value: "<id|name>",
        desc: "the domain of the new mission (required unless --mission)",
      },
      {
        name: "mission",
        type: "string",
        value: "<id|title>",
        desc: "add the steps to this mission instead of a new one (step names stay unique in it)",
      },
      {
        name: "title",
        type: "string",
        value: "<text>",
        desc: "the new mission's title (default: the file's name = …, else the file name)",
      },
      {
        name: "wait",
        type: "boolean",
        desc: "follow the steps until the pipeline ends (exit 1 when it failed or was cancelled)",
      },
    ],
  },
  {
    path: ["pipeline", "get"],
    summary: "show a pipeline's steps, their states and what each waits on",
    usage: "<mission>",
    example: "ep pipeline get msn_01",
    module: "pipeline",
    args: { min: 1, max: 1 },
  },
  {
    path: ["task", "retry"],
    summary: "put a failed or cancelled task back in the queue",
    usage: "<id>",
    example: "ep task retry tsk_01",
    module: "work",
    args: { min: 1 },
  },
  {
    path: ["task", "cancel"],
    summary: "cancel a task",
    usage: "<id> [--reason <text>]",
    example: "ep task cancel tsk_01 --reason 'superseded'",
    module: "work",
    args: { min: 1 },
    options: [{ name: "reason", type: "string", value: "<text>", desc: "why (recorded on the task)" }],
  },
  {
    path: ["agent", "ls"],
    summary: "list agents known to the tower",
    usage: "[--domain <id>]",
    example: "ep agent ls --domain dom_01",
    module: "work",
    options: [{ ...domainOpt, desc: "only this domain" }],
  },
  {
    path: ["agent", "get"],
    summary: "show an agent and what the tasks it ran cost",
    usage: "<agent>",
    example: "ep agent get reviewer",
    module: "work",
    args: { min: 1, max: 1 },
    options: [{ ...domainOpt, desc: "look the name up in this domain" }],
  },
  {
    path: ["node", "ls"],
    summary: "list registered nodes and the domains each serves",
    usage: "",
    example: "ep node ls",
    module: "work",
  },
  {
    path: ["node", "domains", "set"],
    summary: "change the domains a node serves (admin); its agents, claims and reads stay inside them",
    usage: "<node_id> (--domain <id|name>… | --all)",
    example: "ep node domains set nod_01 --domain demo --domain ops",
    module: "node",
    args: { min: 1, max: 1 },
    options: [
      {
        name: "domain",
        type: "string",
        multiple: true,
        value: "<id|name>",
        desc: "a domain the node serves (repeatable)",
      },
      { name: "all", type: "boolean", desc: "serve every domain (recorded as *)" },
    ],
  },
  {
    path: ["node", "reload"],
    summary: "make a node reload cron.toml, agents.toml and runtimes.toml (admin; waits for its answer)",
    usage: "<node_id> [--wait <ms>]",
    example: "ep node reload nod_01",
    module: "node",
    args: { min: 1 },
    options: [
      {
        name: "wait",
        type: "string",
        value: "<ms>",
        desc: "how long to wait for the node's answer (default 10000, 0 = do not wait)",
      },
    ],
  },
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
