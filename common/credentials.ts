// The CLI's saved tower credentials: $EP_HOME/cli/credentials.json, mode 0600, {url, token}.
// Written by `ep login` and `ep up`, read by every tower command when EP_TOKEN is not set.
import { chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { EpError } from "./errors.js";
import { cliCredentialsFile } from "./paths.js";

export interface CliCredentials {
  url: string;
  token: string;
}

export async function readCredentials(path: string = cliCredentialsFile()): Promise<CliCredentials | undefined> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new EpError("config_invalid", `cannot read ${path}: ${(err as Error).message}`, { file: path });
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new EpError("config_invalid", `${path} is not valid JSON; run 'ep login --url <url> --token <token>' again`, {
      file: path,
    });
  }
  const d = doc as Partial<CliCredentials> | null;
  if (!d || typeof d.url !== "string" || typeof d.token !== "string") {
    throw new EpError("config_invalid", `${path} must hold {"url": …, "token": …}; run 'ep login' again`, {
      file: path,
    });
  }
  return { url: d.url, token: d.token };
}

/** Writes atomically, 0600 from the first byte, in a 0700 directory. */
export async function writeCredentials(creds: CliCredentials, path: string = cliCredentialsFile()): Promise<void> {
  if (!/^https?:\/\//.test(creds.url))
    throw new EpError("invalid_argument", `url must be an http(s) URL (got ${JSON.stringify(creds.url)})`, {
      field: "url",
    });
  if (!creds.token) throw new EpError("invalid_argument", "token must not be empty", { field: "token" });
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify({ url: creds.url.replace(/\/+$/, ""), token: creds.token }, null, 2) + "\n", {
    mode: 0o600,
  });
  await chmod(tmp, 0o600);
  await rename(tmp, path);
}

/** Removes the file; resolves to whether there was one. */
export async function removeCredentials(path: string = cliCredentialsFile()): Promise<boolean> {
  try {
    await readFile(path);
  } catch {
    return false;
  }
  await rm(path, { force: true });
  return true;
}
