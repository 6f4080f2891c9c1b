// mgmt.sock: the daemon management services over Connect and JSON-RPC from one registration.
import type { ConnectRouter } from "@connectrpc/connect";
import type { Logger } from "../../common/log.js";
import { createJsonRpcHandler } from "./json-rpc.js";
import type { UnixSocketServer } from "./socket-server.js";
import { serveUnixSocket } from "./socket-server.js";

export interface MgmtSocketOptions {
  path: string;
  /** Registers DaemonService, AgentService, CronService, SuperviseService, ToolService implementations. */
  routes: (router: ConnectRouter) => void;
  log: Logger;
  mode?: number;
}

export function serveMgmtSocket(opts: MgmtSocketOptions): Promise<UnixSocketServer> {
  return serveUnixSocket({
    path: opts.path,
    mode: opts.mode,
    routes: opts.routes,
    jsonRpc: createJsonRpcHandler({ routes: opts.routes, log: opts.log }),
    log: opts.log,
  });
}
