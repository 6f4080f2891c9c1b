import { createHash } from "node:crypto";

/** How secrets (tokens, tickets, sessions) are kept: their SHA-256, never the value. */
export const hashSecret = (secret: string): string => createHash("sha256").update(secret).digest("hex");
