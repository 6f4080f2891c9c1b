// Entry of the interactive console (`ep` with no arguments on a terminal); loaded lazily.
// The tower client (Connect, protobuf, generated code) loads after the first frame is drawn.
import { render } from "ink";
import { createContext } from "../context.js";
import { COMMANDS } from "../registry.js";
import { App } from "./app.js";
import type { TuiDataSource } from "./data-source.js";

/** A data source that loads the tower client on first use. */
function lazyTowerSource(url: string, token: string | undefined): TuiDataSource {
  let real: Promise<TuiDataSource> | undefined;
  const get = () =>
    (real ??= Promise.all([import("../tower.js"), import("./tower-source.js")]).then(
      ([{ towerTransport }, { createTowerSource }]) => createTowerSource(towerTransport(url, token), url),
    ));
  let closed = false;
  return {
    label: url,
    missions: async () => (await get()).missions(),
    agents: async () => (await get()).agents(),
    approvals: async () => (await get()).approvals(),
    tasks: async (m) => (await get()).tasks(m),
    task: async (t) => (await get()).task(t),
    frames: async (t) => (await get()).frames(t),
    cancelTask: async (t) => (await get()).cancelTask(t),
    retryTask: async (t) => (await get()).retryTask(t),
    subscribe(onEvent, onError) {
      let stop: (() => void) | undefined;
      void get().then((s) => {
        if (!closed) stop = s.subscribe(onEvent, onError);
      });
      return () => stop?.();
    },
    chat: async (c) => (await get()).chat(c),
    approve: async (s, a) => (await get()).approve(s, a),
    reject: async (s, a) => (await get()).reject(s, a),
    close() {
      closed = true;
      void real?.then((s) => s.close());
    },
  };
}

export async function runTui(env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const ctx = createContext(COMMANDS[0], [], {}, env);
  const url = ctx.url();
  const source = lazyTowerSource(url, ctx.token());
  // EP_TUI_EXIT_AFTER_FIRST_FRAME: the start-up benchmark measures launch → first frame
  const benchExit = env.EP_TUI_EXIT_AFTER_FIRST_FRAME ? () => setImmediate(() => process.exit(0)) : undefined;
  const app = render(<App source={source} onFirstFrame={benchExit} />, { exitOnCtrlC: false });
  await app.waitUntilExit();
  source.close();
  return 0;
}
