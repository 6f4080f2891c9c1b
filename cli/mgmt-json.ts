// `--json` output of daemon answers. mgmt.sock answers proto JSON (lowerCamelCase); `ep … --json`
// prints the proto field names (snake_case) like every other command. Done without protobuf
// (importing it costs `ep agent cron list --json` a third of its start-up budget): every key is
// renamed except inside the responses' Struct/Value fields, whose contents are printed as they
// are. cli/mgmt-json.test.ts checks this against the schemas of gen/ep/daemon/v1/mgmt_pb.ts.

/** Response fields of type google.protobuf.Struct/Value, per JSON-RPC method (mgmt.proto). */
export const OPAQUE_FIELDS: Record<string, readonly string[]> = { "tool.run": ["result"] };

/** lowerCamelCase proto JSON name → proto field name. */
export function snakeName(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function snakeKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(snakeKeys);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [snakeName(k), snakeKeys(v)]));
}

/** The snake_case proto JSON of a mgmt.sock result, e.g. mgmtJson("cron.list", res). */
export function mgmtJson(method: string, result: unknown): Record<string, unknown> {
  const opaque = OPAQUE_FIELDS[method] ?? [];
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries((result ?? {}) as Record<string, unknown>))
    out[snakeName(k)] = opaque.includes(k) ? v : snakeKeys(v);
  return out;
}
