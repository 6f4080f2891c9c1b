// The shapes of `ep`'s command table (registry.ts) and the options several command groups share.
// Data and types only: loaded on every start.

export type ModuleName =
  | "node"
  | "daemon"
  | "mgmt"
  | "doctor"
  | "work"
  | "approvals"
  | "ai"
  | "events"
  | "secret"
  | "webhook"
  | "token"
  | "session"
  | "meta"
  | "up"
  | "attach"
  | "workspace"
  | "changes"
  | "pipeline";

export interface OptionSpec {
  name: string;
  type: "string" | "boolean";
  short?: string;
  multiple?: boolean;
  /** placeholder shown in help, e.g. "<id>" */
  value?: string;
  desc: string;
}

export interface CommandSpec {
  path: string[];
  summary: string;
  /** the argument part of the usage line, after the command words */
  usage: string;
  example: string;
  module: ModuleName;
  options?: OptionSpec[];
  /** positional arguments: at least min, at most max (default min) */
  args?: { min: number; max?: number };
}

export const domainOpt: OptionSpec = { name: "domain", type: "string", value: "<id>", desc: "domain id" };
