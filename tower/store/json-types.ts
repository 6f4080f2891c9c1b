// A JSON object as the stores keep it (payloads, inputs, results): its own module so the part
// stores (ai-store.ts and the others) use it without importing store.ts, which imports them.

export type JsonObject = Record<string, unknown>;
