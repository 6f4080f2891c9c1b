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
// Requires the sequence to hand out ids in time order (an identity column's default CACHE 1;
// a larger cache lets sessions draw from their own ranges) and PostgreSQL 13+ (xid8).

/** A transaction snapshot (`pg_current_snapshot()::text` is "xmin:xmax:xip,xip,…"). */
export interface Snapshot {
  xmin: bigint;
  xmax: bigint;
  /** top-level xids running when it was taken */
  xip: bigint[];
}

export function parseSnapshot(text: string): Snapshot {
  const m = /^(\d+):(\d+):([\d,]*)$/.exec(text.trim());
  if (!m) throw new Error(`not a PostgreSQL snapshot: ${JSON.stringify(text)}`);
  return { xmin: BigInt(m[1]), xmax: BigInt(m[2]), xip: m[3] ? m[3].split(",").map((x) => BigInt(x)) : [] };
}

/** Whether transaction `xid` had ended (committed or rolled back) when `s` was taken. */
export function endedBefore(xid: bigint, s: Snapshot): boolean {
  return xid < s.xmin || (xid < s.xmax && !s.xip.includes(xid));
}

/** A gap seen in one snapshot: ids ≤ upTo are final once all of `xids` have ended. */
interface Pending {
  upTo: number;
  xids: bigint[];
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

  /**
   * Takes a read made in snapshot `snap`: `ids` are all visible ids > `from` in ascending
   * order (possibly cut off by a limit), with `from` ≤ final. Returns the new final.
   */
  advance(from: number, ids: readonly number[], snap: Snapshot, now = Date.now()): number {
    if (from > this.final) throw new Error(`a horizon read must start at or below ${this.final}, not ${from}`);
    let cap = this.final;
    // A gap seen earlier whose running transactions have all ended is settled: everything
    // up to its top id is visible in this snapshot or gone.
    for (const p of this.pending) if (p.upTo > cap && p.xids.every((x) => endedBefore(x, snap))) cap = p.upTo;
    let f = cap;
    for (const id of ids) {
      if (id <= f) continue;
      if (id !== f + 1) break;
      f = id;
    }
    const top = ids.length ? ids[ids.length - 1] : 0;
    if (top > f) {
      // a gap below `top`: with nothing running, whatever is missing is gone for good
      if (!snap.xip.length) f = top;
      else if (this.pending.length < MAX_PENDING && !this.pending.some((p) => p.upTo >= top)) this.pending.push({ upTo: top, xids: snap.xip, seenAt: now });
    }
    this.final = Math.max(this.final, f);
    this.pending = this.pending.filter((p) => p.upTo > this.final);
    return this.final;
  }

  /** A first read has set the horizon (start()), or found it could not. */
  started = false;

  /**
   * The first read of a store: `top` is the newest visible id in snapshot `snap`. With nothing
   * running then, every id up to it is final at once; otherwise when every transaction running
   * then has ended (`ended`, a later snapshot) — else the horizon is found by reading from 0.
   */
  start(top: number, snap: Snapshot, ended?: Snapshot): void {
    this.started = true;
    if (!snap.xip.length || (ended && snap.xip.every((x) => endedBefore(x, ended)))) this.final = Math.max(this.final, top);
  }

  /** The oldest unsettled gap: since when, and which transactions it waits for (diagnostics). */
  oldestGap(): { since: number; waitingFor: bigint[] } | undefined {
    const p = this.pending[0];
    return p && { since: p.seenAt, waitingFor: p.xids };
  }
}
