// `ep domain|mission|task|workspace|pipeline` and the tower's view of agents and nodes: the work on
// the tower (a part of the command table, registry.ts; data only).
import { domainOpt, type CommandSpec } from "./command-spec.js";

export const WORK_COMMANDS: CommandSpec[] = [
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
];
