// A task's attempts, read from its own matrix events: each claim starts one, its end
// (succeeded, failed, cancelled, or requeued when the lease expired) closes it. The task page
// puts a divider per attempt in the transcript and says how long the last one ran — measured
// from the attempt's own start, not from the first frame of an earlier attempt.

export interface TaskEventLite {
  id: number;
  name: string;
  at?: string;
}

export interface Attempt {
  /** 1, 2, …: in the order the page saw them (a retry starts the tower's count over) */
  n: number;
  /** the id of the claim that started it: frames after it belong to it */
  fromId: number;
  /** when it ran (task.running), else when it was claimed */
  startedAt?: string;
  endedAt?: string;
  /** succeeded, failed, cancelled, requeued; undefined while it runs */
  outcome?: string;
}

const ENDS = new Set(["task.succeeded", "task.failed", "task.cancelled", "task.requeued"]);

export function attemptsOf(events: TaskEventLite[]): Attempt[] {
  const out: Attempt[] = [];
  for (const e of [...events].sort((a, b) => a.id - b.id)) {
    const open = out.at(-1);
    const current = open && !open.outcome ? open : undefined;
    if (e.name === "task.claimed") out.push({ n: out.length + 1, fromId: e.id, startedAt: e.at });
    else if (e.name === "task.running" && current) current.startedAt = e.at ?? current.startedAt;
    else if (ENDS.has(e.name) && current) {
      current.endedAt = e.at;
      current.outcome = e.name.slice("task.".length);
    }
  }
  return out;
}

/** How long an attempt ran, in ms; undefined while it runs or when a time is missing. */
export function ranMs(a: Attempt | undefined): number | undefined {
  if (!a?.startedAt || !a.endedAt) return undefined;
  const ms = Date.parse(a.endedAt) - Date.parse(a.startedAt);
  return Number.isFinite(ms) && ms >= 0 ? ms : undefined;
}

/** The attempt a frame belongs to: the last one started before it (undefined: before any claim). */
export function attemptOfFrame(attempts: Attempt[], frameId: number): Attempt | undefined {
  let hit: Attempt | undefined;
  for (const a of attempts) if (a.fromId < frameId) hit = a;
  return hit;
}
