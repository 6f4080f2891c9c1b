// Ending process groups a previous daemon left behind (kill -9 of epd leaves its detached runs).
import { readFileSync } from "node:fs";
import { liveGroupMembers, processGone, signalGroup } from "../runtimes/process-group.js";

/** The kernel's start time of a process (clock ticks since boot), to tell a reused pid apart. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/**
 * SIGKILLs the group led by `pid` if it is still the run we started: the leader alive with the same
 * start time, or the leader gone and members left in its group (a pgid cannot be reused while any
 * member lives). Returns how many members were signalled.
 */
export function killOrphanGroup(pid: number, pidStart: string | undefined): number {
  if (!processGone(pid)) {
    const start = processStartTime(pid);
    if (pidStart && start && start !== pidStart) return 0;
  }
  const members = liveGroupMembers(pid);
  if (members.length) signalGroup(pid, "SIGKILL");
  return members.length;
}
