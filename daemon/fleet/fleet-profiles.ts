// Starting and stopping profile agents: at daemon start, and when a valid agents.toml is applied
// (removed profiles stop and are retired at the tower, changed ones restart with their new
// definition, new ones are enrolled and start; unchanged ones are left alone).
import { mkdir } from "node:fs/promises";
import type { FleetProfile } from "./agents-file.js";
import type { FleetCore } from "./fleet-core.js";
import type { Enrollment } from "./fleet-enroll.js";
import type { createProfileEnv } from "./fleet-env.js";
import type { FleetSupervision } from "./fleet-supervision.js";

export interface ProfileLifecycleDeps {
  hosts: FleetSupervision;
  env: ReturnType<typeof createProfileEnv>;
  enrollment: Enrollment;
  changed(): void;
}

export function createProfileLifecycle(core: FleetCore, { hosts, env, enrollment, changed }: ProfileLifecycleDeps) {
  const { log, publish, profileEvent } = core;
  const { tmux, acp, backend, watchdog } = hosts;

  async function startProfile(p: FleetProfile): Promise<void> {
    try {
      await mkdir(env.cwdOf(p), { recursive: true, mode: 0o700 });
      if (p.supervise) {
        const agent = env.hosted(p);
        backend.register(agent);
        // a pane the watchdog finds running is adopted without a start: read its log from here
        if (agent.mode === "tmux") await tmux.attachLog(agent);
        await watchdog.add(agent);
      } else if (p.runtime === "muxhost_hosted") {
        const how = await tmux.ensure(env.hosted(p));
        publish(
          profileEvent(p, {
            type: "matrix",
            name: `agent.${how}`,
            status: "running",
            payload: { session: p.session, socket: core.settings.tmuxSocket },
          }),
        );
      }
    } catch (err) {
      log.error("profile agent did not start", { profile: p.id, error: (err as Error).message });
      publish(
        profileEvent(p, {
          type: "matrix",
          name: "agent.start_failed",
          status: "error",
          payload: { error: (err as Error).message },
        }),
      );
    }
  }

  /** Stops what runs for a profile (its supervised process, tmux pane or ACP session) and ends its secrets session. */
  async function stopProfile(p: FleetProfile, reason: string): Promise<void> {
    try {
      if (p.supervise) {
        watchdog.remove(p.id);
        await backend.stop(p.id);
      } else if (p.runtime === "muxhost_hosted") {
        await tmux.stop(p.session);
      } else if (p.runtime === "vendorA_agent_acp" && acp.isAlive(p.id)) {
        await acp.stop(p.id);
      }
    } catch (err) {
      log.warn("profile agent did not stop cleanly", { profile: p.id, error: (err as Error).message });
    }
    await env.endSession(p.id);
    publish(profileEvent(p, { type: "matrix", name: "agent.stopped", status: "stopped", payload: { reason } }));
  }

  return {
    /** Daemon start: retire what a valid agents.toml dropped while epd was down, enrol, start every profile. */
    async startAll(): Promise<void> {
      await enrollment.enrollProfiles();
      if (core.loadedOk) {
        for (const id of Object.keys(core.profileSessions))
          if (!core.profiles.some((p) => p.id === id)) delete core.profileSessions[id];
        for (const id of Object.keys(core.enrolled)) {
          if (!core.profiles.some((p) => p.id === id))
            await enrollment.forget(id, `profile ${id} was removed from agents.toml`);
        }
      }
      for (const p of core.profiles) await startProfile(p);
    },

    /** Applies a valid agents.toml; answers what it did in words. */
    async applyProfiles(next: FleetProfile[]): Promise<string> {
      const profiles = core.profiles;
      const before = new Map(profiles.map((p) => [p.id, p]));
      const ids = new Set(next.map((p) => p.id));
      const removed = profiles.filter((p) => !ids.has(p.id));
      const changedOnes = next.filter(
        (p) => before.has(p.id) && JSON.stringify(before.get(p.id)) !== JSON.stringify(p),
      );
      const added = next.filter((p) => !before.has(p.id));
      if (!removed.length && !changedOnes.length && !added.length)
        return `agents.toml: unchanged (${profiles.length} profiles)`;
      for (const p of removed) {
        await stopProfile(p, "removed from agents.toml");
        await enrollment.forget(p.id, `profile ${p.id} was removed from agents.toml`);
      }
      for (const p of changedOnes) await stopProfile(before.get(p.id)!, "changed in agents.toml; restarting");
      core.profiles = next;
      await enrollment.enrollProfiles();
      for (const p of [...changedOnes, ...added]) await startProfile(p);
      changed();
      log.info("agents.toml applied", {
        added: added.map((p) => p.id),
        changed: changedOnes.map((p) => p.id),
        removed: removed.map((p) => p.id),
      });
      const list = (what: string, ps: FleetProfile[]) =>
        ps.length ? [`${what} ${ps.map((p) => p.id).join(", ")}`] : [];
      const what = [...list("added", added), ...list("restarted", changedOnes), ...list("removed", removed)];
      return `agents.toml: applied (${what.join("; ")})`;
    },
  };
}
