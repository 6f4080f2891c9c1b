// System tools some tests need but a developer's machine may lack (Debian packages that
// .ci/run installs). The rule for the whole suite: outside CI a test whose tool is missing is
// skipped with the reason printed; under CI (CI set) it runs and fails, naming the package.
import { accessSync, constants } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";

export interface OptionalTool {
  name: string;
  /** absolute path of the executable, when found */
  path: string | undefined;
  /** true only outside CI with the tool missing: `describe.skipIf(tool.skip)` */
  skip: boolean;
  /**
   * the path; throws (naming the Debian package) when the tool is missing. Call it first in the test or its beforeAll.
   */
  require(): string;
}

const inCi = () => Boolean(process.env.CI);

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Looks `name` up on PATH and in the sbin directories (nginx lives there and non-root PATHs lack them). */
export function findExecutable(
  name: string,
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  if (isAbsolute(name)) return executable(name) ? name : undefined;
  const dirs = [...(env.PATH ?? "").split(delimiter).filter(Boolean), "/usr/local/sbin", "/usr/sbin", "/sbin"];
  for (const dir of dirs) {
    const p = join(dir, name);
    if (executable(p)) return p;
  }
  return undefined;
}

/**
 * `name`: the executable (or an absolute path, e.g. from an env override); `pkg`: the Debian
 * package that provides it; `suite`: what is skipped, for the printed line.
 */
export function optionalTool(name: string, opts: { pkg: string; suite: string }): OptionalTool {
  const path = findExecutable(name);
  const reason = `${name} is not installed (apt-get install ${opts.pkg})`;
  if (!path) {
    if (inCi()) console.log(`${opts.suite}: FAILING under CI: ${reason}; .ci/run installs it`);
    else console.log(`${opts.suite}: skipping: ${reason}; under CI these tests fail instead`);
  }
  return {
    name,
    path,
    skip: !path && !inCi(),
    require() {
      if (!path) throw new Error(`${opts.suite}: ${reason}; under CI it is required (.ci/run installs ${opts.pkg})`);
      return path;
    },
  };
}
