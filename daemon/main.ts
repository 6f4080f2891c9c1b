// epd: the node daemon. The entry stays light: each subcommand imports what it needs.
import { EpError, toEpError } from "../common/errors.js";
import type { Logger } from "../common/log.js";

const VERSION = "0.1.0";

const HELP = `epd — the EP node daemon

Usage:
  epd run [--backend-url <url>] [--booster-wasm <path>]   run the daemon (link to the tower, claim and run tasks)
  epd get-secret <NAME>                                  print a secret granted to the calling agent
  epd mcp                                                stdio MCP server for agents (tool catalog)
  epd --help | --version

Environment:
  EP_HOME              data directory (default ~/.ep; the daemon keeps $EP_HOME/epd/)
  EP_NODE_FILE         node identity file (default /etc/ep/node.json, written by 'ep agent node register')
  EP_BASE_URL          tower URL when --backend-url is not given (else node.json's tower_url,
                       else http://localhost:8008)
  EP_POLL_MS           safety-net poll interval in ms (default 5000)
  EP_LINK              session (default): work down and outcomes up on one HTTP/2 stream, falling back to
                       http1 by itself when the tower or a proxy cannot take it; http1: always the HTTP/1.1 link
  EP_SHUTDOWN_GRACE_MS how long SIGTERM waits for running tasks (default 30000)
  EP_FANOUT_LISTEN     serve the tower's event stream to local clients on this loopback host:port (GET /events, /stats)
  EP_METRICS_LISTEN    serve Prometheus metrics on this host:port (GET /metrics, no token; off by default)
  EP_LOG_LEVEL         debug | info | warn | error (default info)

get-secret exit codes (docs/secrets.md): 0 printed, 3 denied (not granted, or not a live session),
4 unknown secret, 7 unreachable, 2 usage, 1 other.

Example:
  EP_NODE_FILE=/etc/ep/node.json epd run --backend-url https://tower.example:8008
`;

async function runCommand(args: string[]): Promise<void> {
  // SIGTERM and SIGINT are handled from the first moment: before the daemon exists there is nothing
  // to close; while it starts, closing runs beside the start (a cron fire of the first tick is
  // recorded, a mgmt socket removed) instead of the signal's default, which kills the process
  let daemon: { close(): Promise<void> } | undefined;
  let log: Logger | undefined;
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    if (!daemon) process.exit(0);
    log?.info("shutting down", { signal });
    daemon.close().then(
      () => process.exit(0),
      (err: Error) => {
        log?.error("shutdown failed", { error: err.message });
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  const { parseArgs } = await import("node:util");
  const { values } = parseArgs({
    args,
    options: {
      "backend-url": { type: "string" },
      "booster-wasm": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return void process.stdout.write(HELP);
  const [{ createLogger }, { readNodeIdentity }, { nodeFile }, { createDaemon }] = await Promise.all([
    import("../common/log.js"),
    import("../common/node-identity.js"),
    import("../common/paths.js"),
    import("./daemon.js"),
  ]);
  log = createLogger("epd");
  const identity = await readNodeIdentity(nodeFile());
  const backendUrl = (
    values["backend-url"] ||
    process.env.EP_BASE_URL ||
    identity.tower_url ||
    "http://localhost:8008"
  ).replace(/\/+$/, "");
  if (!/^https?:\/\/[^/]+/.test(backendUrl))
    throw new EpError("invalid_argument", `--backend-url must be an http(s) URL (got ${JSON.stringify(backendUrl)})`, {
      field: "backend-url",
    });
  const created = await createDaemon({
    identity,
    backendUrl,
    log,
    epdEntry: process.argv[1],
    boosterWasm: values["booster-wasm"],
  });
  daemon = created;
  // a signal that came while the daemon was being made (nothing started yet) ends it now
  if (stopping) process.exit(0);
  await created.start();
}

async function getSecretCommand(args: string[]): Promise<void> {
  if (args.length !== 1 || args[0].startsWith("-")) {
    if (args[0] === "--help" || args[0] === "-h")
      return void process.stdout.write(
        "Usage: epd get-secret <NAME>\n  reads EP_SECRETS_SOCKET " +
          "and EP_SECRETS_SESSION (set for agents the daemon starts)\n",
      );
    throw new EpError("invalid_argument", "usage: epd get-secret <NAME>");
  }
  const socket = process.env.EP_SECRETS_SOCKET;
  const session = process.env.EP_SECRETS_SESSION;
  if (!socket || !session)
    throw new EpError(
      "unavailable",
      "EP_SECRETS_SOCKET and EP_SECRETS_SESSION are not set; epd get-secret works inside an agent started by epd",
    );
  const { getSecretLine } = await import("./mgmt/client.js");
  const value = await getSecretLine(socket, session, args[0], { timeoutMs: 10_000 });
  process.stdout.write(value + "\n");
}

/** get-secret's documented exit codes: 3 denied, 4 unknown, 7 unreachable. */
function exitCodeOf(err: EpError): number {
  return err.exitCode;
}

async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case undefined:
    case "--help":
    case "-h":
    case "help":
      return void process.stdout.write(HELP);
    case "--version":
    case "-v":
    case "version":
      return void process.stdout.write(`epd ${VERSION}\n`);
    case "run":
      return runCommand(rest);
    case "get-secret":
      return getSecretCommand(rest);
    case "mcp":
      return (await import("./mcp/mcp-command.js")).runMcpCommand(rest);
    default:
      throw new EpError("invalid_argument", `unknown command ${JSON.stringify(cmd)}; see 'epd --help'`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  const raw = err as { code?: string; message?: string };
  const ep =
    err instanceof EpError
      ? err
      : raw.code?.startsWith("ERR_PARSE_ARGS")
        ? new EpError("invalid_argument", raw.message)
        : toEpError(err);
  process.stderr.write(`epd: ${ep.message}\n`);
  process.exit(exitCodeOf(ep));
});
