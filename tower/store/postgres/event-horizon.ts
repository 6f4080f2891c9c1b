// Which event ids are final on PostgreSQL, where transactions commit in parallel.
//
// Event ids come from a sequence, drawn inside the writing transaction, so they can become
// visible out of order: id 11 commits while id 10's transaction is still running. A reader
// that moved its cursor to 11 would never see 10. The horizon is the highest id H such that
// every id ≤ H is either visible or will never exist (its transaction rolled back, or the
// sequence skipped it); readers only ever return events up to H.
//
// The proof that a missing id will never appear uses transaction snapshots. Every event
// insert makes sure its transaction has an xid before it draws ids (insertEvents). Say a
// statement's snapshot S shows id r but not id g < r. g was drawn before r, r's transaction
// committed before S was taken, so g's transaction had its xid before S was taken: it is
// either over (and rolled back, since g is not visible) or in S's list of running xids. So
// once every xid running in S is over (checked against a later snapshot), every id below r
// that S did not show is visible in that later snapshot or gone for good.
//
// "In S's list of running xids" needs care: a snapshot lists only the running xids below its
// xmax, which is the newest *completed* xid + 1, not the next xid to be handed out. A writer
// that took its xid after the last completed one runs unlisted ("7:7:" does not mean nothing
// runs). So a read that finds a gap is followed by a second look (withRunning): a later
// snapshot S' and the xids the server's backends hold then. A writer running unlisted at S
// either ended before S' (so its xid is below S'.xmax) or still runs (so a backend holds it):
// every xid in [S.xmax, max(S'.xmax, newest backend xid + 1)) counts as running at S.
//
// Requires the sequence to hand out ids in time order (an identity column's default CACHE 1;
// a larger cache lets sessions draw from their own ranges) and PostgreSQL 13+ (xid8).

/** A transaction snapshot (`pg_current_snapshot()::text` is "xmin:xmax:xip,xip,…"). */
export interface Snapshot {
  xmin: bigint;
  xmax: bigint;
  /** top-level xids running when it was taken, below xmax */
  xip: bigint[];
  /**
   * Set by withRunning: xids in [xmax, unlistedTo) may have been running unlisted. A read that
   * shows a gap needs it; without it, nothing can be said about the writers above xmax.
   */
  unlistedTo?: bigint;
}

export function parseSnapshot(text: string): Snapshot {
  const m = /^(\d+):(\d+):([\d,]*)$/.exec(text.trim());
  if (!m) throw new Error(`not a PostgreSQL snapshot: ${JSON.stringify(text)}`);
  return { xmin: BigInt(m[1]), xmax: BigInt(m[2]), xip: m[3] ? m[3].split(",").map((x) => BigInt(x)) : [] };
}

/** The full (epoch-carrying) xid of a 32-bit `xid` seen near `ref`: the one within 2^31 of it. */
export function fullXid(xid: bigint, ref: bigint): bigint {
  const WRAP = 1n << 32n;
  let full = (ref & ~(WRAP - 1n)) | xid;
  if (full > ref + (WRAP >> 1n)) full -= WRAP;
  else if (full < ref - (WRAP >> 1n)) full += WRAP;
  return full;
}

/**
 * `s` with the writers it does not list bounded: `later` is a snapshot taken after it and
 * `backendXids` the top-level xids the server's backends held after it (32-bit, as
 * pg_stat_get_activity shows them).
 */
export function withRunning(
  s: Snapshot,
  later: Snapshot,
  backendXids: readonly (string | number | bigint)[],
): Snapshot {
  // biome-ignore lint/complexity/useMathMinMax: xids are bigints, which Math.max refuses
  let to = later.xmax > s.xmax ? later.xmax : s.xmax;
  for (const x of backendXids) {
    const full = fullXid(BigInt(x), s.xmax) + 1n;
    if (full > to) to = full;
  }
  return { ...s, unlistedTo: to };
}

/** The writers that may have been running when a snapshot was taken. */
interface Running {
  xids: bigint[];
  /** and every xid in [from, to) */
  from: bigint;
  to: bigint;
}

function runningAt(s: Snapshot): Running {
  if (s.unlistedTo === undefined) throw new Error("a read that shows a gap needs the unlisted writers (withRunning)");
  return { xids: s.xip, from: s.xmax, to: s.unlistedTo };
}

function nothingRunning(r: Running): boolean {
  return !r.xids.length && r.to <= r.from;
}

/** Whether nothing was running when `s` (withRunning) was taken. */
export function quietAt(s: Snapshot): boolean {
  return nothingRunning(runningAt(s));
}

/** Whether every writer running when `s` (withRunning) was taken had ended when `later` was. */
export function endedSince(s: Snapshot, later: Snapshot): boolean {
  return allEnded(runningAt(s), later);
}

/** Whether every writer in `r` had ended when `later` was taken. */
function allEnded(r: Running, later: Snapshot): boolean {
  if (!r.xids.every((x) => endedBefore(x, later))) return false;
  if (r.to <= r.from || r.to <= later.xmin) return true;
  if (r.to > later.xmax) return false;
  return !later.xip.some((x) => x >= r.from && x < r.to);
}

/** Whether transaction `xid` had ended (committed or rolled back) when `s` was taken. */
export function endedBefore(xid: bigint, s: Snapshot): boolean {
  return xid < s.xmin || (xid < s.xmax && !s.xip.includes(xid));
}

/** A gap seen in one snapshot: ids ≤ upTo are final once all of `xids` have ended. */
interface Pending {
  upTo: number;
  running: Running;
  seenAt: number;
}

/** At most this many unresolved gaps are remembered (later ones are found again later). */
const MAX_PENDING = 64;

/**
 * The horizon of one store. Feed it reads made one after another (never two at once:
 * a read may only build on horizons established by snapshots older than its own).
 */
export class EventHorizon {
  /** Every id ≤ final is visible or will never exist. */
  final = 0;
  private pending: Pending[] = [];

  /** Whether `ids` (a read past `from`) leave a hole above the horizon: then the read needs withRunning. */
  gapIn(ids: readonly number[]): boolean {
    let f = this.final;
    for (const id of ids) {
      if (id <= f) continue;
      if (id !== f + 1) return true;
      f = id;
    }
    return false;
  }

  /**
   * Takes a read made in snapshot `snap`: `ids` are all visible ids > `from` in ascending
   * order (possibly cut off by a limit), with `from` ≤ final. Returns the new final. When
   * gapIn(ids), `snap` must list every writer running then (withRunning).
   */
  advance(from: number, ids: readonly number[], snap: Snapshot, now = Date.now()): number {
    if (from > this.final) throw new Error(`a horizon read must start at or below ${this.final}, not ${from}`);
    let cap = this.final;
    // A gap seen earlier whose running transactions have all ended is settled: everything
    // up to its top id is visible in this snapshot or gone.
    for (const p of this.pending) if (p.upTo > cap && allEnded(p.running, snap)) cap = p.upTo;
    let f = cap;
    for (const id of ids) {
      if (id <= f) continue;
      if (id !== f + 1) break;
      f = id;
    }
    const top = ids.length ? ids[ids.length - 1] : 0;
    if (top > f) {
      // a gap below `top`: with nothing running, whatever is missing is gone for good
      const running = runningAt(snap);
      if (nothingRunning(running)) f = top;
      else if (this.pending.length < MAX_PENDING && !this.pending.some((p) => p.upTo >= top))
        this.pending.push({ upTo: top, running, seenAt: now });
    }
    this.final = Math.max(this.final, f);
    this.pending = this.pending.filter((p) => p.upTo > this.final);
    return this.final;
  }

  /** A first read has set the horizon (start()), or found it could not. */
  started = false;

  /**
   * The first read of a store: `top` is the newest visible id in snapshot `snap` (withRunning).
   * With nothing running then, every id up to it is final at once; otherwise when every
   * transaction running then has ended (`ended`, a later snapshot) — else the horizon is found
   * by reading from 0.
   */
  start(top: number, snap: Snapshot, ended?: Snapshot): void {
    this.started = true;
    const running = runningAt(snap);
    if (nothingRunning(running) || (ended && allEnded(running, ended))) this.final = Math.max(this.final, top);
  }

  /** The oldest unsettled gap: since when, and which transactions it waits for (diagnostics). */
  oldestGap(): { since: number; waitingFor: bigint[]; andFrom?: [bigint, bigint] } | undefined {
    const p = this.pending[0];
    if (!p) return undefined;
    const { xids, from, to } = p.running;
    return { since: p.seenAt, waitingFor: xids, ...(to > from ? { andFrom: [from, to] as [bigint, bigint] } : {}) };
  }
}
