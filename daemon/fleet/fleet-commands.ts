import { EpError, invalidField } from "../../common/errors.js";
import type { FleetProfile } from "./agents-file.js";
import type { FleetCore } from "./fleet-core.js";
import type { Fleet } from "./fleet-types.js";
import type { Watchdog } from "../supervise/index.js";

const MAX_PROMPT = 100_000;

export interface FleetCommandDeps {
  deliver(p: FleetProfile, prompt: string): Promise<string>;
  watchdog: Pick<Watchdog, "restart" | "pause" | "resume">;
  reloadConfig: Fleet["reloadConfig"];
}

export function createFleetCommands(core: FleetCore, { deliver, watchdog, reloadConfig }: FleetCommandDeps) {
  const { log, publish, profileEvent, towerAgentId } = core;

  function supervised(target: string): FleetProfile {
    const p = core.findProfile(target);
    if (!p)
      throw new EpError(
        "agent_not_found",
        `No supervised agent "${target}"; list them with 'ep agent supervise list'.`,
        { id: target },
      );
    if (!p.supervise)
      throw new EpError("agent_not_found", `Agent "${p.id}" is not supervised; set supervise = true in agents.toml.`, {
        id: target,
      });
    return p;
  }

  const signal: Fleet["signal"] = async (target, prompt, opts = {}) => {
    if (!target.trim()) throw invalidField("target", "is required");
    if (!prompt.trim()) throw invalidField("prompt", "is required");
    if (prompt.length > MAX_PROMPT) throw invalidField("prompt", `is longer than ${MAX_PROMPT} characters`);
    const source = opts.source ?? "cli";
    const p = core.findProfile(target);
    if (p) {
      const via = await deliver(p, prompt);
      log.info("signal delivered", { profile: p.id, via, source });
      if (opts.inbox !== false) {
        publish(
          profileEvent(p, {
            type: "inbox",
            name: "agent.signal",
            status: "delivered",
            payload: { agent_id: towerAgentId(p.id) ?? p.id, prompt, via, source },
          }),
        );
      }
      return via;
    }
    const enrolled = core.deps.enrolled;
    const agent = enrolled?.find(target.trim());
    if (!enrolled || !agent)
      throw new EpError("agent_not_found", `no agent or profile named ${target} on this node`, { target });
    const via = enrolled.deliver(agent, prompt);
    if (opts.inbox !== false) {
      publish({
        type: "inbox",
        name: "agent.signal",
        domainId: agent.domainId,
        agentId: agent.id,
        status: "delivered",
        payload: { agent_id: agent.id, prompt, via, source },
      });
    }
    return via;
  };

  /** The tower's supervise command on a profile: failures are logged and published, not thrown. */
  function supervise(p: FleetProfile, op: string): void {
    const act = async () => {
      supervised(p.id);
      if (op === "restart") await watchdog.restart(p.id);
      else if (op === "pause") watchdog.pause(p.id);
      else if (op === "resume") watchdog.resume(p.id);
      else throw new EpError("invalid_argument", `unknown supervise op ${JSON.stringify(op)}`, { field: "op" });
    };
    act().catch((err: Error) => {
      log.warn("supervise command from the tower failed", { profile: p.id, op, error: err.message });
      publish(
        profileEvent(p, {
          type: "matrix",
          name: "supervise.failed",
          status: "failed",
          payload: { op, error: err.message, source: "tower" },
        }),
      );
    });
  }

  const handleLink: Fleet["handleLink"] = (msg) => {
    const c = msg.command;
    if (c.case === "configReload") {
      reloadConfig({ requestId: c.value.requestId || undefined, source: "tower" }).catch((err: Error) =>
        log.error("config reload failed", { error: err.message }),
      );
      return true;
    }
    if (c.case !== "signal" && c.case !== "supervise") return false;
    const p = core.findProfile(c.value.agentId);
    if (!p) return false;
    if (c.case === "supervise") {
      supervise(p, c.value.op);
      return true;
    }
    const prompt = c.value.prompt;
    // the tower recorded the inbox event when it accepted the signal
    signal(p.id, prompt, { source: "tower", inbox: false }).catch((err: Error) => {
      log.warn("signal from the tower not delivered", { profile: p.id, error: err.message });
      publish(
        profileEvent(p, {
          type: "matrix",
          name: "agent.signal.failed",
          status: "failed",
          payload: { error: err.message, source: "tower" },
        }),
      );
    });
    return true;
  };

  return { signal, handleLink, supervised };
}
