// First start: the admin token for the local CLI, the console login link, and the
// secret-store key file, so a fresh tower is usable with nothing configured.
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Tower } from "./app.js";

export interface BootstrapResult {
  adminTokenFile?: string;
  loginUrl?: string;
  secretKeyFile?: string;
}

function writeSecretFile(path: string, content: string): void {
  // 0600 from the first byte: never briefly readable by others
  writeFileSync(path, content, { mode: 0o600, flag: "wx" });
}

export async function bootstrap(
  tower: Tower,
  home: string,
  publicUrl: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<BootstrapResult> {
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const out: BootstrapResult = {};
  const secret = await tower.services.auth.bootstrapAdmin();
  if (secret) {
    out.adminTokenFile = join(home, "admin.token");
    if (existsSync(out.adminTokenFile)) writeFileSync(out.adminTokenFile, secret + "\n", { mode: 0o600 });
    else writeSecretFile(out.adminTokenFile, secret + "\n");
    const { ticket } = await tower.services.auth.createTicket(
      { subject: "bootstrap-admin", role: "admin", via: "internal" },
      { purpose: "login", ttlMs: 24 * 3_600_000 },
    );
    out.loginUrl = `${publicUrl}/ui/login#ticket=${ticket}`;
  }
  if (!env.EP_SECRET_KEY) {
    const keyFile = env.EP_SECRET_KEY_FILE || join(home, "secret.key");
    if (!existsSync(keyFile)) {
      writeSecretFile(keyFile, randomBytes(32).toString("base64") + "\n");
      out.secretKeyFile = keyFile;
    }
  }
  return out;
}
