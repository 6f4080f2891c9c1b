// Where EP keeps its files. EP_HOME defaults to ~/.ep; the daemon home is $EP_HOME/epd.
import { homedir } from "node:os";
import { join } from "node:path";

export function epHome(env: NodeJS.ProcessEnv = process.env): string {
  return env.EP_HOME || join(homedir(), ".ep");
}

export function daemonHome(env: NodeJS.ProcessEnv = process.env): string {
  return join(epHome(env), "epd");
}

export function towerHome(env: NodeJS.ProcessEnv = process.env): string {
  return join(epHome(env), "tower");
}

export function nodeFile(env: NodeJS.ProcessEnv = process.env): string {
  return env.EP_NODE_FILE || "/etc/ep/node.json";
}

export function cliCredentialsFile(env: NodeJS.ProcessEnv = process.env): string {
  return join(epHome(env), "cli", "credentials.json");
}

export function baseUrl(env: NodeJS.ProcessEnv = process.env): string {
  return (env.EP_BASE_URL || "http://localhost:8008").replace(/\/+$/, "");
}

export const daemonSockets = (env: NodeJS.ProcessEnv = process.env) => ({
  mgmt: join(daemonHome(env), "mgmt.sock"),
  secrets: join(daemonHome(env), "secrets.sock"),
  attach: join(daemonHome(env), "epd.sock"),
});
