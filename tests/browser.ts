// Debian's chromium driven by playwright-core, launched one way for every browser test and for
// scripts/screenshots.mjs, and the web console built into dist/web when the sources are newer.
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type BrowserContext, type Page } from "playwright-core";

const ROOT = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json")) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
})();

/** The browser executable: EP_CHROMIUM, else Debian's chromium. */
export const CHROMIUM = process.env.EP_CHROMIUM ?? "/usr/bin/chromium";

/**
 * Flags for a headless run in a container: no sandbox (root, no user namespaces), no GPU, no
 * background traffic, and /tmp instead of /dev/shm for shared memory (containers often give
 * /dev/shm 64 MB, where the renderer crashes).
 */
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-dev-shm-usage",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** A headless chromium with its own profile directory (the caller removes it). */
export function launchChromium(
  profile: string,
  opts: { viewport?: { width: number; height: number }; executablePath?: string } = {},
): Promise<BrowserContext> {
  return chromium.launchPersistentContext(profile, {
    executablePath: opts.executablePath ?? CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: opts.viewport ?? { width: 1280, height: 800 },
  });
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = statSync(p);
    newest = Math.max(newest, st.isDirectory() ? newestMtime(p) : st.mtimeMs);
  }
  return newest;
}

/** Builds web/ into dist/web unless the build there is newer than every source file (`npm test` builds it first). */
export async function ensureConsoleBuilt(): Promise<void> {
  const index = join(ROOT, "dist", "web", "index.html");
  if (existsSync(index) && statSync(index).mtimeMs >= newestMtime(join(ROOT, "web"))) return;
  const { build } = await import("vite");
  await build({ configFile: join(ROOT, "web", "vite.config.ts"), logLevel: "warn" });
}

/**
 * Chromium on the console at `url`, logged in with a login ticket: its context, its page and the page's uncaught
 * errors.
 */
export async function openConsole(
  url: string,
  ticket: string,
  profile: string,
  viewport = { width: 1280, height: 900 },
): Promise<{ ctx: BrowserContext; page: Page; pageErrors: string[] }> {
  const ctx = await launchChromium(profile, { viewport });
  const page = ctx.pages()[0] ?? (await ctx.newPage());
  const pageErrors: string[] = [];
  page.on("pageerror", (err) => pageErrors.push(err.message));
  await page.goto(`${url}/ui/login#ticket=${ticket}`);
  await page.getByRole("navigation", { name: "Views" }).waitFor();
  return { ctx, page, pageErrors };
}
