// The runtimes a task or agent can name (SPEC §1): one list for the tower's validation, the tool
// catalog, and epd's adapters.
export const RUNTIME_KINDS = [
  "vendorA_code",
  "vendorA_agent_acp",
  "vendorB",
  "vendorC",
  "muxhost_hosted",
  "shell",
] as const;

export type RuntimeKind = (typeof RUNTIME_KINDS)[number];

export function isRuntimeKind(kind: string): kind is RuntimeKind {
  return (RUNTIME_KINDS as readonly string[]).includes(kind);
}
