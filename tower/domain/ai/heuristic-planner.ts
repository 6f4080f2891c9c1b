// The local planner: no key, no network. It understands the everyday operator requests in
// several phrasings (list/show/create/submit/retry/cancel/signal/restart/pause/resume, by name
// or id) through the caller's lookups, and answers anything else with what it can do.
// It never approves: approval only happens through the action bar.
import { EpError } from "../../../common/errors.js";
import { EVENT_TYPES, RUNTIMES, TASK_STATUSES, validateToolArgs } from "../tools/index.js";
import type { AgentRef, PlanInput, PlanResult, PlannedToolCall, Planner, PlannerContext, TaskRef } from "./planner.js";
import { actionBarFor, type ViewSpec } from "./view-spec.js";
import {
  agentOf,
  domainOf,
  ID_PREFIX,
  Message,
  missionOf,
  NAME,
  NOUN,
  Q_OPEN,
  QUOTE,
  taskOf,
  type Kind,
  type Resolved,
} from "./planner-text.js";

export const HEURISTIC_HELP = [
  "I can:",
  "• list domains, missions, tasks (of a mission, by status), " +
    "agents, nodes, pending approvals, events, cron jobs, supervision",
  "• show a mission, task or agent by name or id",
  '• create a domain or mission: create mission "Release 2.0" in domain acme',
  '• submit a task: submit task "Run tests" to mission Release with command ' +
    '"npm test" (runtime, priority, capabilities, broadcast, assign to agent)',
  "• retry or cancel a task; signal, restart, pause or resume an agent; claim a task for an agent",
  '• write a doc: put doc "plan.md" in mission Release saying "…"',
  "Changes are proposed as pending actions; approve or reject them in the action bar.",
].join("\n");

function call(tool: string, args: Record<string, unknown>): PlannedToolCall {
  return { tool, arguments: validateToolArgs(tool, args) };
}

function result(reply: string, toolCalls: PlannedToolCall[] = [], viewSpecs?: ViewSpec[]): PlanResult {
  const out: PlanResult = { reply, toolCalls };
  if (viewSpecs && viewSpecs.length > 0) out.viewSpecs = viewSpecs;
  return out;
}

function notFound(
  kind: Kind,
  name: string | undefined,
  listTool: string,
  args: Record<string, unknown> = {},
): PlanResult {
  const what = name
    ? `I could not find a ${kind} called "${name}".`
    : `Which ${kind}? Name it or give its id (${ID_PREFIX[kind]}_…).`;
  return result(`${what} Here are the ${kind}s I know.`, [call(listTool, args)]);
}

const PROPOSED = "Approve or reject it in the action bar; nothing changes until then.";

// ---------------------------------------------------------------------------------------------
// Intents, tried in order. Each returns undefined when the message is not for it.

type Intent = (msg: Message, ctx: PlannerContext) => Promise<PlanResult | undefined>;

const approvals: Intent = async (msg, ctx) => {
  const verb = msg.has(/\b(approve|approving|accept|reject|rejecting|deny|decline|confirm)\b/);
  const bare = msg.has(/^\s*(yes|yep|yeah|ok|okay|sure|go ahead|do it|proceed|lgtm)\b[\s.!]*(please)?[\s.!]*$/);
  if (!verb && !bare) return undefined;
  if (
    msg.has(/\b(list|show|what|which|any)\b/) &&
    !msg.has(/\b(approve|reject)\s+(all|everything|them|what|it|those|these|the)\b/) &&
    !msg.idOf("act")
  )
    return undefined;
  const ids = await ctx.listPendingActionIds();
  const bar = actionBarFor(ids);
  const head = "A message never approves or rejects anything.";
  if (ids.length === 0) return result(`${head} There is nothing pending right now.`);
  const listed = ids.slice(0, 10).join(", ") + (ids.length > 10 ? ", …" : "");
  return result(
    `${head} ${ids.length} action${ids.length === 1 ? " is" : "s are"} ` +
      `pending (${listed}); use the Approve or Reject buttons in the action bar.`,
    [],
    bar ? [bar] : undefined,
  );
};

const help: Intent = async (msg) => {
  if (!msg.has(/^\s*(help|\?|what can you do|what do you do|commands|how do i|usage)\b/)) return undefined;
  return result(HEURISTIC_HELP);
};

function titleFor(msg: Message, noun: string, others: string[]): string | undefined {
  return (
    msg.capture(`\\b(?:called|named|titled)\\s+${NAME}`) ??
    msg.freeQuote([...others, "command", "cmd", "prompt", "content", "saying", "description", "runtime", "with"]) ??
    msg.capture(`\\b${noun}\\s+(?!called\\b|named\\b|titled\\b)${NAME}`)
  );
}

const CREATE_VERB = /\b(create|new|add|make|set\s*up|open|start|register)\b/;

const createDomain: Intent = async (msg) => {
  if (
    !msg.has(CREATE_VERB) ||
    !msg.has(/\b(?:create|new|add|make|set\s*up|open|start|register)\s+(?:a\s+|an\s+|the\s+)?(?:new\s+)?domain\b/)
  )
    return undefined;
  const name = titleFor(msg, "domain", ["mission", "task", "agent"]);
  if (!name) return result('What should the domain be called? For example: create domain "acme".');
  return result(`Proposed: create domain "${name}". ${PROPOSED}`, [call("create_domain", { name })]);
};

const createMission: Intent = async (msg, ctx) => {
  if (!msg.has(/\b(?:create|new|add|make|set\s*up|open|start)\s+(?:a\s+|an\s+|the\s+)?(?:new\s+)?mission\b/))
    return undefined;
  const title = titleFor(msg, "mission", ["domain", "task", "agent"]);
  if (!title)
    return result('What should the mission be called? For example: create mission "Release 2.0" in domain acme.');
  let domain = await domainOf(msg, ctx, [`\\b(?:in|to|under|within|into|for)\\s+${NAME}`]);
  if (!domain.ref && !domain.missing && ctx.defaultDomain) domain = { ref: await ctx.defaultDomain() };
  if (!domain.ref) return notFound("domain", domain.missing, "list_domains");
  const args: Record<string, unknown> = { domain_id: domain.ref.id, title };
  const description = msg.capture(`\\bdescription\\s*:?\\s*(${QUOTE})`);
  if (description) args.description = description;
  return result(`Proposed: create mission "${title}" in domain ${domain.ref.name ?? domain.ref.id}. ${PROPOSED}`, [
    call("create_mission", args),
  ]);
};

const putDoc: Intent = async (msg, ctx) => {
  if (!msg.has(/\b(write|put|add|save|create|store|attach)\b.*\b(doc|docs|document)\b/)) return undefined;
  const name =
    msg.capture(`\\b(?:doc|document)\\s+(?:called\\s+|named\\s+)?${NAME}`) ??
    msg.freeQuote(["mission", "saying", "content", "with"]);
  const content = msg.capture(`\\b(?:saying|content|containing|with\\s+content|with\\s+text|text)\\s*:?\\s*(${QUOTE})`);
  const mission = await missionOf(msg, ctx, [`\\b(?:to|in|into|on|for|under)\\s+(?:the\\s+)?${NAME}`]);
  if (!mission.ref) return notFound("mission", mission.missing, "list_missions");
  if (!name || content === undefined) {
    return result(
      'Give the document a name and content, for example: put doc "plan.md" in mission Release saying "…".',
    );
  }
  return result(`Proposed: write doc "${name}" to mission ${mission.ref.title ?? mission.ref.id}. ${PROPOSED}`, [
    call("put_doc", { mission_id: mission.ref.id, name, content }),
  ]);
};

const RUNTIME_BY_LOWER = new Map(RUNTIMES.map((r) => [r.toLowerCase(), r]));

/**
 * A title read from the words after "task" that starts with a preposition ("in ui") is the mission's place, not a
 * title.
 */
function readableTitle(title: string | undefined): string | undefined {
  return title && /^(?:in|into|to|for|on|under|with|that|which|from|of|at|by)\b/i.test(title) ? undefined : title;
}

/** "that runs echo hi", "running make": a command without quotes (a quoted one is read as the command). */
const UNQUOTED_RUN = new RegExp(
  `\\b(?:(?:that|which|to)\\s+(?:runs?|executes?|calls?)|running|executing)\\s+(?!${Q_OPEN})`,
  "i",
);
const TASK_PHRASING = 'submit task "Run tests" to mission Release with command "npm test"';

/**
 * What a request to submit a task says that the planner cannot read: a command that is not
 * quoted ("that runs echo hello") or no title. Undefined when it reads the whole request.
 * Proposing a task without its command (issue 38: `Submit task "in ui"`) is worse than asking.
 */
function unreadTask(msg: Message, title: string | undefined): { reasons: string[]; command?: string } | undefined {
  const hasCommand = msg.capture(`\\b(?:command|cmd|running|execute|exec)\\s*:?\\s*(${QUOTE})`) !== undefined;
  if (hasCommand || !UNQUOTED_RUN.test(msg.masked)) return undefined;
  const command = msg.capture(`\\b(?:runs?|executes?|calls?|running|executing)\\s+(.+?)\\s*[.!]?\\s*$`, true);
  const reasons = [`the command${command ? ` (${command})` : ""} is not in quotes, so I cannot tell where it ends`];
  if (!title) reasons.push("I found no title for the task");
  return { reasons, command };
}

function cannotReadTask(
  unread: { reasons: string[]; command?: string },
  title: string | undefined,
  mission: string,
): PlanResult {
  const cmd = unread.command ?? "…";
  const yours =
    `submit task "${title ?? (unread.command ? unread.command.slice(0, 60) : "a title")}" ` +
    `to mission ${/\s/.test(mission) ? `"${mission}"` : mission} with command "${cmd}"`;
  return result(
    `I could not read all of that: ${unread.reasons.join("; ")}. Nothing was ` +
      `proposed. The phrasing I understand: ${TASK_PHRASING}. For yours: ${yours}`,
  );
}

const submitTask: Intent = async (msg, ctx) => {
  const verb = /\b(submit|queue|enqueue|add|create|new|schedule|dispatch|run|launch|post|make)\b/;
  if (!msg.has(verb) || !msg.has(/\b(task|job|work)\b/) || msg.has(/\bcron\b/)) return undefined;
  const phrase = new RegExp(
    String.raw`(?<!-)\b(?:submit|queue|enqueue|add|create|new|schedule|dispatch|run|launch|post|make)\s+` +
      String.raw`(?:a\s+|an\s+|the\s+|this\s+)?(?:new\s+)?(?:mesh\s+|claimable\s+)?(?:task|job|work)\b`,
  );
  if (!msg.has(phrase)) {
    return undefined;
  }
  const title = readableTitle(titleFor(msg, "(?:task|job)", ["mission", "domain", "agent"]));
  const mission = await missionOf(msg, ctx, [`\\b(?:to|in|into|on|for|under)\\s+(?:the\\s+)?${NAME}`]);
  if (!mission.ref) return notFound("mission", mission.missing, "list_missions");
  const unread = unreadTask(msg, title);
  if (unread) return cannotReadTask(unread, title, mission.ref.title ?? mission.ref.id);
  if (!title) return result('What is the task? For example: submit task "Run tests" to mission Release.');
  const args: Record<string, unknown> = { mission_id: mission.ref.id, title };
  const description = msg.capture(`\\bdescription\\s*:?\\s*(${QUOTE})`);
  if (description) args.description = description;
  const priority = /\bpriority\s*(?:of|=|:|is)?\s*(-?\d+)\b/i.exec(msg.masked)?.[1];
  if (priority !== undefined) args.priority = Number(priority);
  else if (msg.has(/\b(urgent|high[- ]priority|asap)\b/)) args.priority = 10;
  else if (msg.has(/\blow[- ]priority\b/)) args.priority = -10;
  const runtimeWord = /\b(vendorA_code|vendorA_agent_acp|vendorB|vendorC|muxhost_hosted|shell)\b/i.exec(
    msg.masked,
  )?.[1];
  const command = msg.capture(`\\b(?:command|cmd|running|execute|exec)\\s*:?\\s*(${QUOTE})`);
  const prompt = msg.capture(`\\bprompt\\s*:?\\s*(${QUOTE})`);
  if (runtimeWord) args.runtime = RUNTIME_BY_LOWER.get(runtimeWord.toLowerCase());
  else if (command) args.runtime = "shell";
  else if (ctx.defaultRuntime) args.runtime = ctx.defaultRuntime;
  if (command || prompt) args.input = { ...(command ? { command } : {}), ...(prompt ? { prompt } : {}) };
  const caps =
    /\b(?:capabilit(?:y|ies)|needing|requiring|requires|needs)\s+([a-z0-9_-]+(?:\s*(?:,|and)\s*[a-z0-9_-]+)*)/i.exec(
      msg.masked,
    )?.[1];
  if (caps) args.capabilities = caps.split(/\s*(?:,|\band\b)\s*/i).filter(Boolean);
  const attempts = /\b(?:max(?:imum)?[_ ]attempts|attempts)\s*(?:of|=|:)?\s*(\d+)\b/i.exec(msg.masked)?.[1];
  if (attempts) args.max_attempts = Number(attempts);
  if (msg.has(/\b(broadcast|to all agents|on all agents|every agent)\b/)) args.claim_policy = "broadcast";
  else if (msg.has(/\bassign(?:ed)?\s+(?:it\s+)?to\b/)) {
    const agent = await agentOf(msg, ctx, [`\\bassign(?:ed)?\\s+(?:it\\s+)?to\\s+(?:agent\\s+)?${NAME}`]);
    if (!agent.ref) return notFound("agent", agent.missing, "list_agents");
    args.claim_policy = "assigned";
    args.assignee_agent_id = agent.ref.id;
  }
  return result(`Proposed: submit task "${title}" to mission ${mission.ref.title ?? mission.ref.id}. ${PROPOSED}`, [
    call("submit_mesh_task", args),
  ]);
};

async function taskTarget(msg: Message, ctx: PlannerContext, verbs: string): Promise<Resolved<TaskRef>> {
  const mission = msg.has(/\bmission\b/) || msg.idOf("msn") ? await missionOf(msg, ctx) : {};
  return taskOf(msg, ctx, mission.ref?.id, [
    `\\b(?:${verbs})\\s+(?:the\\s+)?(?:failed\\s+|running\\s+|queued\\s+|last\\s+)?${NAME}`,
  ]);
}

const retryTask: Intent = async (msg, ctx) => {
  const verbs = "retry|re-?run|requeue|re-?queue|restart|re-?try";
  if (
    !msg.has(/\b(retry|re-?run|requeue|re-?queue|re-?try|try again)\b/) &&
    !(msg.has(/\brestart\b/) && (msg.has(/\btasks?\b/) || msg.idOf("tsk")))
  ) {
    return undefined;
  }
  if (msg.has(/\bagent\b/) && !msg.has(/\btask\b/) && !msg.idOf("tsk")) return undefined;
  const task = await taskTarget(msg, ctx, verbs);
  if (!task.ref) return notFound("task", task.missing, "list_tasks", { status: "failed" });
  return result(
    `Proposed: retry task ${task.ref.title ? `"${task.ref.title}" (${task.ref.id})` : task.ref.id}. ${PROPOSED}`,
    [call("retry_mesh_task", { task_id: task.ref.id })],
  );
};

const cancelTask: Intent = async (msg, ctx) => {
  if (!msg.has(/\b(cancel|abort|stop|kill|halt|terminate|drop)\b/)) return undefined;
  if (!msg.has(/\b(task|job)s?\b/) && !msg.idOf("tsk")) return undefined;
  const task = await taskTarget(msg, ctx, "cancel|abort|stop|kill|halt|terminate|drop");
  if (!task.ref) return notFound("task", task.missing, "list_tasks");
  const args: Record<string, unknown> = { task_id: task.ref.id };
  const reason = msg.capture(`\\b(?:because|reason\\s*:?)\\s+(.+)$`);
  if (reason) args.reason = reason;
  return result(
    `Proposed: cancel task ${task.ref.title ? `"${task.ref.title}" (${task.ref.id})` : task.ref.id}. ${PROPOSED}`,
    [call("cancel_task", args)],
  );
};

const claimTask: Intent = async (msg, ctx) => {
  if (!msg.has(/\bclaim\b/)) return undefined;
  const agent = await agentOf(msg, ctx, [`\\b(?:for|by|as|with)\\s+(?:agent\\s+)?${NAME}`]);
  if (!agent.ref) return notFound("agent", agent.missing, "list_agents");
  return result(`Proposed: claim the next task for agent ${agent.ref.name ?? agent.ref.id}. ${PROPOSED}`, [
    call("claim_mesh_task", { agent_id: agent.ref.id }),
  ]);
};

const signalAgent: Intent = async (msg, ctx) => {
  if (!msg.has(/\b(signal|tell|ask|message|ping|send|notify|instruct|nudge)\b/)) return undefined;
  let agent: Resolved<AgentRef> = {};
  let prompt: string | undefined;
  const AGENT = `(?:the\\s+)?(?:agent\\s+)?(${QUOTE}|agt_[0-9a-z]+|[\\w.-]+)`;
  // send "…" to agent X
  let m = new RegExp(`\\b(?:send|post)\\s+(${QUOTE}|.+?)\\s+to\\s+${AGENT}`, "i").exec(msg.masked);
  if (m) {
    prompt = msg.unmask(m[1]);
    agent = await resolveOne(msg.unmask(m[2]), ctx);
  }
  // tell/ask agent X to …
  m ??= new RegExp(`\\b(?:tell|ask|instruct|nudge)\\s+(?!me\\b|us\\b)${AGENT}\\s+(?:to\\s+)?(.+)$`, "i").exec(
    msg.masked,
  );
  if (m && !prompt) {
    agent = await resolveOne(msg.unmask(m[1]), ctx);
    prompt = msg.unmask(m[2]);
  }
  // signal|message|ping agent X: … / with "…" / saying …
  m ??= new RegExp(`\\b(?:signal|message|ping|notify)\\s+${AGENT}\\s*(?::|with|saying|that|to)?\\s*(.*)$`, "i").exec(
    msg.masked,
  );
  if (m && !prompt) {
    agent = await resolveOne(msg.unmask(m[1]), ctx);
    prompt = msg.unmask(m[2]);
  }
  if (!m) return undefined;
  if (!agent.ref) return notFound("agent", agent.missing, "list_agents");
  if (!prompt)
    return result(
      `What should I tell ${agent.ref.name ?? agent.ref.id}? For example: ` +
        `signal agent ${agent.ref.name ?? agent.ref.id}: "rebase on main".`,
    );
  return result(`Proposed: signal ${agent.ref.name ?? agent.ref.id} with "${prompt}". ${PROPOSED}`, [
    call("signal_agent", { agent_id: agent.ref.id, prompt }),
  ]);
};

async function resolveOne(nameOrId: string, ctx: PlannerContext): Promise<Resolved<AgentRef>> {
  if (/^agt_[0-9a-z]{4,}$/i.test(nameOrId))
    return { ref: (await ctx.findAgent(nameOrId.toLowerCase())) ?? { id: nameOrId.toLowerCase(), name: nameOrId } };
  const ref = await ctx.findAgent(nameOrId);
  return ref ? { ref } : { missing: nameOrId };
}

const SUPERVISE: { tool: string; verb: string; test: RegExp; verbs: string }[] = [
  {
    tool: "resume_agent",
    verb: "resume",
    test: /\b(resume|unpause|un-pause|re-?enable\s+auto-?restart|turn\s+on\s+auto-?restart)\b/,
    verbs: "resume|unpause|un-pause",
  },
  {
    tool: "pause_agent",
    verb: "pause",
    test: new RegExp(
      String.raw`\b(pause|suspend|freeze|hold|disable\s+auto-?restart|stop\s+auto-?restart|` +
        String.raw`turn\s+off\s+auto-?restart|stop)\b`,
    ),
    verbs: "pause|suspend|freeze|hold|stop",
  },
  {
    tool: "restart_agent",
    verb: "restart",
    test: /\b(restart|reboot|bounce|reload|relaunch|respawn)\b/,
    verbs: "restart|reboot|bounce|reload|relaunch|respawn",
  },
];

const superviseAgent: Intent = async (msg, ctx) => {
  const op = SUPERVISE.find((s) => msg.has(s.test));
  if (!op) return undefined;
  if (msg.has(/\b(list|show)\b/) && !msg.idOf("agt")) return undefined;
  const agent = await agentOf(msg, ctx, [
    `\\b(?:${op.verbs})\\s+(?:the\\s+)?${NAME}`,
    `\\bauto-?restart\\s+(?:for|of|on)\\s+(?:agent\\s+)?${NAME}`,
  ]);
  if (!agent.ref) return notFound("agent", agent.missing, "list_agents");
  return result(`Proposed: ${op.verb} agent ${agent.ref.name ?? agent.ref.id}. ${PROPOSED}`, [
    call(op.tool, { agent_id: agent.ref.id }),
  ]);
};

// ---- reads ----

const LIST_VERB = new RegExp(
  String.raw`\b(list|ls|show|display|get|see|view|give|what|which|whats|what's|who|any|how many|find|fetch|print|` +
    String.raw`describe|status|tell me about|how is|how's|check)\b`,
);

const readCron: Intent = async (msg) => {
  if (!msg.has(/\b(cron|crons|schedules?|scheduled\s+jobs?|cronjobs?)\b/)) return undefined;
  return result("Here are the cron jobs.", [call("list_cron_jobs", {})]);
};

const readEvents: Intent = async (msg, ctx) => {
  if (!msg.has(/\b(events?|activity|happened|happening|feed|audit\s+(?:log|trail)|timeline)\b/)) return undefined;
  const args: Record<string, unknown> = {};
  const limit = /\b(?:last|latest|recent|past)\s+(\d+)\b/i.exec(msg.masked)?.[1];
  if (limit) args.limit = Math.min(Number(limit), 1000);
  const types = EVENT_TYPES.filter((t) => msg.has(new RegExp(`\\b${t}\\b`)));
  if (types.length > 0) args.types = types;
  if (msg.has(/\bagent\b/) || msg.idOf("agt")) {
    const agent = await agentOf(msg, ctx);
    if (agent.ref) args.agent_id = agent.ref.id;
  }
  if (msg.has(/\bmission\b/) || msg.idOf("msn")) {
    const mission = await missionOf(msg, ctx);
    if (mission.ref) args.mission_id = mission.ref.id;
  }
  if (msg.has(/\bdomain\b/) || msg.idOf("dom")) {
    const domain = await domainOf(msg, ctx);
    if (domain.ref) args.domain_id = domain.ref.id;
  }
  return result("Here are the recent events.", [call("list_events", args)]);
};

const readSupervision: Intent = async (msg, ctx) => {
  if (!msg.has(/\b(supervis\w*|auto-?restarts?|watchdog)\b/)) return undefined;
  const args: Record<string, unknown> = {};
  if (msg.idOf("agt") || msg.has(/\bagent\s+\S/)) {
    const agent = await agentOf(msg, ctx);
    if (agent.ref) args.agent_id = agent.ref.id;
  }
  return result("Here is the supervision state.", [call("get_supervision", args)]);
};

const readPending: Intent = async (msg) => {
  if (msg.has(/\btasks?\b/)) return undefined;
  if (!msg.has(/\b(pending|approvals?|awaiting|waiting|needs?\s+(?:my\s+)?approval|to\s+approve|actions?)\b/))
    return undefined;
  return result("Here are the pending actions.", [call("list_pending_actions", { status: "pending" })]);
};

const readNodes: Intent = async (msg) => {
  if (!msg.has(/\b(nodes?|machines?|hosts?|servers?)\b/)) return undefined;
  return result("Here are the nodes.", [call("list_nodes", {})]);
};

const STATUS_WORDS: Record<string, string> = {
  pending: "queued",
  waiting: "queued",
  completed: "succeeded",
  successful: "succeeded",
  finished: "succeeded",
  canceled: "cancelled",
  "in progress": "in_progress",
};

function taskStatusOf(msg: Message): string | undefined {
  for (const s of TASK_STATUSES) if (msg.has(new RegExp(`\\b${s.replace("_", "[ _-]")}\\b`))) return s;
  for (const [word, s] of Object.entries(STATUS_WORDS)) if (msg.has(new RegExp(`\\b${word}\\b`))) return s;
  return undefined;
}

/** Where in the message the first list noun (plural) or entity noun (singular) appears. */
function primaryNoun(msg: Message): { kind: Kind; plural: boolean } | undefined {
  let best: { kind: Kind; plural: boolean; at: number } | undefined;
  for (const kind of ["domain", "mission", "task", "agent"] as Kind[]) {
    const re = new RegExp(`\\b${NOUN[kind]}(s)?\\b`, "g");
    for (const m of msg.lower.matchAll(re)) {
      const plural = m[1] === "s";
      if (!best || (plural && !best.plural) || (plural === best.plural && m.index! < best.at))
        best = { kind, plural, at: m.index! };
      break;
    }
  }
  if (best) return best;
  for (const kind of ["task", "mission", "agent", "domain"] as Kind[])
    if (msg.idOf(ID_PREFIX[kind])) return { kind, plural: false };
  if (msg.has(/\b(who\s+is\s+(online|working|busy|idle)|workers?|fleet)\b/)) return { kind: "agent", plural: true };
  if (msg.has(/\bjobs?\b/)) return { kind: "task", plural: true };
  return undefined;
}

const readEntities: Intent = async (msg, ctx) => {
  const noun = primaryNoun(msg);
  if (!noun) return undefined;
  if (!msg.has(LIST_VERB) && !noun.plural && !msg.idOf(ID_PREFIX[noun.kind])) {
    // "mission Launch" alone still reads as "show mission Launch"
    if (!new RegExp(`^\\s*${NOUN[noun.kind]}\\b`).test(msg.lower)) return undefined;
  }
  switch (noun.kind) {
    case "domain": {
      if (!noun.plural) {
        const domain = await domainOf(msg, ctx);
        if (domain.ref)
          return result(`Here are the missions of domain ${domain.ref.name ?? domain.ref.id}.`, [
            call("list_missions", { domain_id: domain.ref.id }),
          ]);
        if (domain.missing) return notFound("domain", domain.missing, "list_domains");
      }
      return result("Here are the domains.", [call("list_domains", {})]);
    }
    case "mission": {
      if (!noun.plural) {
        const mission = await missionOf(msg, ctx);
        if (mission.ref)
          return result(`Here is mission ${mission.ref.title ?? mission.ref.id}.`, [
            call("get_mission", { mission_id: mission.ref.id }),
          ]);
        if (mission.missing) return notFound("mission", mission.missing, "list_missions");
      }
      const args: Record<string, unknown> = {};
      if (msg.has(/\bdomain\b/) || msg.idOf("dom") || msg.has(/\b(in|of|for|under)\s+\S/)) {
        const domain = await domainOf(msg, ctx, [`\\b(?:in|of|for|under|within)\\s+(?:the\\s+)?${NAME}`]);
        if (domain.ref) args.domain_id = domain.ref.id;
        else if (domain.missing && msg.has(/\bdomain\b/)) return notFound("domain", domain.missing, "list_domains");
      }
      return result("Here are the missions.", [call("list_missions", args)]);
    }
    case "task": {
      if (!noun.plural) {
        const task = await taskTarget(msg, ctx, "show|get|describe|display|check");
        if (task.ref)
          return result(`Here is task ${task.ref.title ? `"${task.ref.title}"` : task.ref.id}.`, [
            call("get_task", { task_id: task.ref.id }),
          ]);
        if (task.missing && !taskStatusOf(msg)) return notFound("task", task.missing, "list_tasks");
      }
      const args: Record<string, unknown> = {};
      const status = taskStatusOf(msg);
      if (status) args.status = status;
      if (msg.has(/\bmission\b/) || msg.idOf("msn") || msg.has(/\b(in|of|for|under)\s+\S/)) {
        const mission = await missionOf(msg, ctx, [`\\b(?:in|of|for|under|within)\\s+(?:the\\s+)?${NAME}`]);
        if (mission.ref) args.mission_id = mission.ref.id;
        else if (mission.missing && msg.has(/\bmission\b/))
          return notFound("mission", mission.missing, "list_missions");
      }
      if (!args.mission_id && (msg.has(/\bdomain\b/) || msg.idOf("dom"))) {
        const domain = await domainOf(msg, ctx);
        if (domain.ref) args.domain_id = domain.ref.id;
      }
      return result("Here are the tasks.", [call("list_tasks", args)]);
    }
    case "agent": {
      if (!noun.plural) {
        const agent = await agentOf(msg, ctx, [`\\b(?:is|how's|how\\s+is|about)\\s+(?:the\\s+)?${NAME}`]);
        if (agent.ref)
          return result(`Here is agent ${agent.ref.name ?? agent.ref.id}.`, [
            call("get_agent", { agent_id: agent.ref.id }),
          ]);
        if (agent.missing) return notFound("agent", agent.missing, "list_agents");
      }
      const args: Record<string, unknown> = {};
      if (msg.has(/\bdomain\b/) || msg.idOf("dom") || msg.has(/\b(in|of|for|under)\s+\S/)) {
        const domain = await domainOf(msg, ctx, [`\\b(?:in|of|for|under|within)\\s+(?:the\\s+)?${NAME}`]);
        if (domain.ref) args.domain_id = domain.ref.id;
        else if (domain.missing && msg.has(/\bdomain\b/)) return notFound("domain", domain.missing, "list_domains");
      }
      return result("Here are the agents.", [call("list_agents", args)]);
    }
  }
};

const INTENTS: Intent[] = [
  approvals,
  help,
  createDomain,
  createMission,
  putDoc,
  submitTask,
  retryTask,
  cancelTask,
  claimTask,
  signalAgent,
  superviseAgent,
  readCron,
  readEvents,
  readSupervision,
  readPending,
  readNodes,
  readEntities,
];

export function createHeuristicPlanner(): Planner {
  async function plan(input: PlanInput): Promise<PlanResult> {
    const content = typeof input.content === "string" ? input.content : "";
    if (content.trim() === "") return result(HEURISTIC_HELP);
    const msg = new Message(content);
    const offered = new Set(input.tools.map((t) => t.name));
    for (const intent of INTENTS) {
      let out: PlanResult | undefined;
      try {
        out = await intent(msg, input.context);
      } catch (err) {
        // e.g. "priority 99999999999": the request was understood but its values are out of range
        if (err instanceof EpError && err.code === "invalid_argument")
          return result(`I cannot propose that: ${err.message}.`);
        throw err;
      }
      if (!out) continue;
      const blocked = out.toolCalls.find((c) => !offered.has(c.tool));
      if (blocked) return result(`The tool ${blocked.tool} is not available in this session.`);
      return out;
    }
    return result(`I did not understand that.\n${HEURISTIC_HELP}`);
  }
  return { name: "heuristic", plan };
}
