// The event horizon against a real PostgreSQL: a reader never returns an id above one whose
// writer still runs, including a writer that took its xid after the newest completed one (a
// snapshot does not list it), and crosses the id once that writer rolls back.
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { PostgresStore, withDefaultUser } from "../tower/store/postgres/postgres-store.js";
import { waitFor } from "./harness.js";
import { freshSchema, requirePg, skipPg, type Schema } from "./replicas-harness.js";

requirePg("pg-event-horizon");

const open: { end(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const c of open.splice(0).reverse()) await c.end().catch(() => {});
});

async function setup(): Promise<{ schema: Schema; store: PostgresStore; client: () => Promise<pg.Client> }> {
  const schema = await freshSchema();
  open.push({ end: () => schema.drop() });
  const store = await PostgresStore.connect(schema.url);
  await store.migrate();
  open.push({ end: () => store.close() });
  const client = async () => {
    const c = new pg.Client({ connectionString: withDefaultUser(schema.url) });
    await c.connect();
    open.push(c);
    return c;
  };
  return { schema, store, client };
}

const insert = async (c: pg.Client) =>
  Number((await c.query("INSERT INTO events (type, created_at) VALUES ('matrix', 'now') RETURNING id")).rows[0].id);
const ids = async (store: PostgresStore, afterId: number) => (await store.listEvents({ afterId })).map((e) => e.id);

describe.skipIf(skipPg)("event horizon on PostgreSQL", () => {
  it("holds back an id above a writer the snapshot does not list, then shows both when it commits", async () => {
    const { store, client } = await setup();
    const base = await store.lastEventId(); // the horizon starts with nothing running
    const [w, g] = [await client(), await client()];
    // w takes its xid first, g second; g draws its id first, w second and commits. The newest
    // completed xid is then w's, so a snapshot's xmax is g's xid: g runs without being listed.
    await w.query("BEGIN");
    await w.query("SELECT pg_current_xact_id()");
    await g.query("BEGIN");
    await g.query("SELECT pg_current_xact_id()");
    const gid = await insert(g);
    const wid = await insert(w);
    await w.query("COMMIT");
    expect(wid).toBe(gid + 1);
    expect(await ids(store, base)).toEqual([]);
    expect(await store.lastEventId()).toBe(base);
    expect((await store.listEvents({ afterId: base, types: ["matrix"] })).map((e) => e.id)).toEqual([]);
    await g.query("COMMIT");
    expect(await ids(store, base)).toEqual([gid, wid]);
  });

  it("crosses the id of such a writer once it rolls back", async () => {
    const { store, client } = await setup();
    const base = await store.lastEventId();
    const [w, g] = [await client(), await client()];
    await w.query("BEGIN");
    await w.query("SELECT pg_current_xact_id()");
    await g.query("BEGIN");
    await g.query("SELECT pg_current_xact_id()");
    await insert(g);
    const wid = await insert(w);
    await w.query("COMMIT");
    expect(await ids(store, base)).toEqual([]);
    await g.query("ROLLBACK");
    // the gap is judged against the writers running when it was seen: a later read settles it
    await waitFor(async () => (await ids(store, base)).length > 0, 5000);
    expect(await ids(store, base)).toEqual([wid]);
    expect(await store.lastEventId()).toBe(wid);
  });
});
