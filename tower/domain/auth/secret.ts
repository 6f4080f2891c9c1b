import { hash } from "node:crypto";

/**
 * How secrets (tokens, tickets, sessions) are kept: their SHA-256, never the value. Every
 * authenticated request hashes its bearer; the one-shot hash() costs a third of a Hash object.
 */
export const hashSecret = (secret: string): string => hash("sha256", secret, "hex");
