// ep-tower: the backend server.
import { parseArgs } from "node:util";
import { EpError, toEpError } from "../common/errors.js";
import { createLogger } from "../common/log.js";
import { createTower } from "./app.js";
import { bootstrap } from "./bootstrap.js";
import { loadConfig } from "./config.js";
import { serveMetricsAddress } from "../common/metrics-server.js";
import { openStore } from "./store/open-store.js";

const HELP = `ep-tower — the EP backend server (REST, Connect, event stream, console at /ui/)

Usage: ep-tower [--listen host:port]

Options:
  --listen <host:port>  address to serve on (env EP_LISTEN, default 127.0.0.1:8008)
  -h, --help            show this help
  -v, --version         print the version

Environment:
  EP_HOME               data directory (default ~/.ep; the tower keeps $EP_HOME/tower/)
  EP_DATABASE_URL       sqlite:<path> (default $EP_HOME/tower/ep.db) or postgres://…
  EP_TLS_CERT/EP_TLS_KEY  serve HTTPS
  EP_ALLOW_INSECURE     allow plain HTTP on a non-loopback address (behind a TLS proxy)
  EP_OIDC_ISSUER/EP_OIDC_AUDIENCE  accept OIDC tokens verified against the issuer's JWKS
  EP_METRICS_LISTEN     also serve /metrics without a token on this host:port (plain HTTP;
                        on the main address /metrics needs a viewer, operator or admin token)
  EP_OIDC_CLIENT_ID[/_SECRET]  the console's "Sign in with <provider>" (redirect URI:
                        $EP_PUBLIC_URL/auth/oidc/callback; docs/deploy.md)

Example:
  EP_HOME=/var/lib/ep ep-tower --listen 127.0.0.1:8008
`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      listen: { type: "string" },
      help: { type: "boolean", short: "h" },
      version: { type: "boolean", short: "v" },
    },
    strict: true,
  });
  if (values.help) return void process.stdout.write(HELP);
  if (values.version) return void process.stdout.write(`ep-tower ${process.env.npm_package_version ?? "0.1.0"}\n`);

  const log = createLogger("tower");
  const config = loadConfig({ listen: values.listen });
  const store = await openStore(config.databaseUrl);
  const tower = await createTower({ config, store, log });
  const boot = await bootstrap(tower, config.home, config.publicUrl);
  await tower.app.listen({ host: config.host, port: config.port });
  log.info("listening", { url: config.publicUrl, store: store.dialect });
  if (config.metricsListen) {
    const served = await serveMetricsAddress(config.metricsListen, tower.metrics, log);
    tower.onClose(() => served.close());
    log.info("metrics listening", { url: served.url });
  }
  if (boot.adminTokenFile) {
    process.stdout.write(
      `\nEP tower is up at ${config.publicUrl}\n` +
        `  admin token written to ${boot.adminTokenFile} (0600) for the local CLI\n` +
        `  one-time console login: ${boot.loginUrl}\n\n`,
    );
  }

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("shutting down", { signal });
    const force = setTimeout(() => process.exit(1), 10_000);
    force.unref();
    tower.close().then(
      () => process.exit(0),
      (err: Error) => {
        log.error("shutdown failed", { error: err.message });
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

main().catch((err: unknown) => {
  const ep = err instanceof EpError ? err : toEpError(err);
  const raw = err as { code?: string; message?: string };
  const message =
    raw.code === "EADDRINUSE" ? `the address is in use (${raw.message}); pick another with --listen` : ep.message;
  process.stderr.write(`ep-tower: ${message}\n`);
  process.exit(raw.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" || ep.errorClass === "invalid" ? 2 : 1);
});
