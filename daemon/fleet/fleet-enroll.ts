// Profiles that name a domain are agents at the tower: enrolled once (the tower agent id is kept
// in fleet-state.json), re-enrolled when their domain or runtime changes, retired (marked dead)
// when no profile acts for them any more. Enrolment retries every 30 s until the tower answers.
import { AgentState, RuntimeSchema, type Runtime } from "../../gen/ep/tower/v1/resources_pb.js";
import { enumOf } from "../../common/vocab.js";
import type { ClockTimer } from "../../common/clock.js";
import { toEpError } from "../../common/errors.js";
import type { LocalAgentRecord } from "../worker/agent-store.js";
import type { FleetProfile } from "./agents-file.js";
import type { FleetCore } from "./fleet-core.js";
import type { EnrolledState } from "./fleet-types.js";

const RETRY_MS = 30_000;

export interface Enrollment {
  /** enrols every profile with a domain that is not (or no longer) enrolled; retries failures */
  enrollProfiles(): Promise<void>;
  /** drops the enrolment of a profile that is gone and marks its tower agent dead */
  forget(profileId: string, reason: string): Promise<void>;
  /** the enrolled profiles as claimers for the task worker */
  claimers(): LocalAgentRecord[];
  close(): void;
}

export function createEnrollment(core: FleetCore): Enrollment {
  const { clock, log, tower, enrolled } = core;
  let timer: ClockTimer | undefined;
  let closed = false;
  /** tower agents told this start whether they are supervised */
  const reported = new Set<string>();

  /** An enrolled profile whose enrolment still fits agents.toml (same domain and runtime). */
  const current = (p: FleetProfile): EnrolledState | undefined => {
    const e = enrolled[p.id];
    return e && p.domain && e.domainId === p.domain && e.runtime === p.runtime ? e : undefined;
  };

  /** Marks a tower agent that no profile acts for any more as dead, with why (best effort). */
  async function retire(agentId: string, reason: string): Promise<void> {
    try {
      await tower.agents.updateAgentState({ agentId, state: AgentState.DEAD, reason });
      log.info("retired a tower agent no profile uses", { agent_id: agentId, reason });
    } catch (err) {
      log.warn("could not mark a tower agent dead", { agent_id: agentId, reason, error: toEpError(err).message });
    }
  }

  /** Agents enrolled before the tower knew about supervision: tell it once per start. */
  async function reportSupervision(p: FleetProfile, have: EnrolledState): Promise<void> {
    if (reported.has(have.agentId)) return;
    await tower.agents
      .updateAgentState({
        agentId: have.agentId,
        state: AgentState.UNSPECIFIED,
        reason: "epd",
        supervised: p.supervise,
      })
      .then(() => reported.add(have.agentId))
      .catch((err: unknown) =>
        log.debug("could not report supervision to the tower; next start tries again", {
          profile: p.id,
          error: toEpError(err).message,
        }),
      );
  }

  /** Enrols one profile; false when the tower could not be reached (retried later). */
  async function enroll(p: FleetProfile & { domain: string }): Promise<boolean> {
    const have = enrolled[p.id];
    try {
      const res = await tower.agents.enrollAgent({
        domainId: p.domain,
        runtime: enumOf<Runtime>(RuntimeSchema, p.runtime, "runtime"),
        capabilities: p.capabilities,
        name: p.name,
        supervised: p.supervise,
      });
      if (!res.agent) throw new Error("the tower answered without the agent");
      reported.add(res.agent.id);
      enrolled[p.id] = { agentId: res.agent.id, domainId: res.agent.domainId, runtime: p.runtime };
      await core.saveState();
      log.info("profile enrolled at the tower", { profile: p.id, agent_id: res.agent.id, domain_id: p.domain });
      core.deps.onEnrolled?.(res.agent.id);
      if (have)
        await retire(
          have.agentId,
          `replaced by ${res.agent.id}: profile ${p.id} now runs ${p.runtime} in domain ${p.domain}`,
        );
      return true;
    } catch (err) {
      const e = toEpError(err);
      log.warn("profile not enrolled at the tower yet; retrying in 30 s", {
        profile: p.id,
        domain_id: p.domain,
        error: e.message,
        code: e.code,
      });
      return false;
    }
  }

  async function enrollProfiles(): Promise<void> {
    let failed = false;
    for (const p of core.profiles) {
      if (!p.domain) continue;
      const have = current(p);
      if (have) await reportSupervision(p, have);
      else if (!(await enroll(p as FleetProfile & { domain: string }))) failed = true;
    }
    if (failed && !closed) {
      timer = clock.setTimeout(() => {
        timer = undefined;
        void enrollProfiles();
      }, RETRY_MS);
    }
  }

  return {
    enrollProfiles,
    async forget(profileId, reason) {
      const gone = enrolled[profileId];
      if (!gone) return;
      delete enrolled[profileId];
      await core.saveState();
      await retire(gone.agentId, reason);
    },
    claimers() {
      const out: LocalAgentRecord[] = [];
      for (const p of core.profiles) {
        const e = current(p);
        if (e)
          out.push({
            id: e.agentId,
            domainId: e.domainId,
            name: p.name,
            runtime: p.runtime,
            capabilities: [...p.capabilities],
            enrolledAt: "",
            profile: p.id,
          });
      }
      return out;
    },
    close() {
      closed = true;
      if (timer) clock.clearTimeout(timer);
    },
  };
}
