// Picks the store from EP_DATABASE_URL: sqlite:<path> (default) or postgres://…
import { EpError } from "../../common/errors.js";
import type { Store } from "./store.js";
import { SqliteStore } from "./sqlite/sqlite-store.js";

export async function openStore(url: string): Promise<Store> {
  let store: Store;
  if (url.startsWith("postgres://") || url.startsWith("postgresql://")) {
    const { PostgresStore } = await import("./postgres/postgres-store.js");
    store = await PostgresStore.connect(url);
  } else if (url.startsWith("sqlite:") || url.startsWith("file:") || url.startsWith("/") || url === ":memory:") {
    const path = url.replace(/^(sqlite|file):(\/\/)?/, "");
    store = SqliteStore.open({
      path: path || ":memory:",
      synchronous: sqliteSynchronous(process.env.EP_SQLITE_SYNCHRONOUS),
    });
  } else {
    throw new EpError(
      "invalid_argument",
      `EP_DATABASE_URL must start with sqlite: or postgres:// ` +
        `(got ${JSON.stringify(url.replace(/\/\/[^@]*@/, "//…@"))})`,
    );
  }
  try {
    await store.migrate();
  } catch (err) {
    await store.close().catch(() => {}); // the migration error is the one to report
    throw err;
  }
  return store;
}

/** EP_SQLITE_SYNCHRONOUS: NORMAL (default; survives a process crash) or FULL (also a power loss). */
function sqliteSynchronous(value: string | undefined): "NORMAL" | "FULL" {
  const v = (value ?? "").trim().toUpperCase();
  if (v === "" || v === "NORMAL") return "NORMAL";
  if (v === "FULL") return "FULL";
  throw new EpError("config_invalid", `EP_SQLITE_SYNCHRONOUS must be NORMAL or FULL (got ${JSON.stringify(value)})`);
}
