// The tools integrators bring (pinned in tests/integrators/package.json, installed by .ci/run into
// tests/integrators/node_modules): a REST client generated from /openapi.json and the MCP
// Inspector CLI. Outside CI a test whose tool is missing is skipped with the reason printed;
// under CI it fails (the rule of tests/optional-tools.ts).
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./harness.js";

export const INTEGRATORS_DIR = join(ROOT, "tests", "integrators");
export const INTEGRATORS_MODULES = join(INTEGRATORS_DIR, "node_modules");

export interface IntegratorTool {
  /** the tool's entry script, run with this Node */
  script: string;
  /** true only outside CI with the tool missing: `describe.skipIf(tool.skip)` */
  skip: boolean;
  /** throws, saying how to install it, when the tool is missing; call it first in the test */
  require(): string;
}

/** `module`'s entry script `script` (relative to the package) in tests/integrators/node_modules. */
export function integratorTool(module: string, script: string, suite: string): IntegratorTool {
  const path = join(INTEGRATORS_MODULES, module, script);
  const found = existsSync(path);
  const reason = `${module} is not installed (run: npm ci --prefix tests/integrators)`;
  if (!found) {
    if (process.env.CI) console.log(`${suite}: FAILING under CI: ${reason}; .ci/run installs it`);
    else console.log(`${suite}: skipping: ${reason}; under CI these tests fail instead`);
  }
  return {
    script: path,
    skip: !found && !process.env.CI,
    require() {
      if (!found) throw new Error(`${suite}: ${reason}; under CI it is required`);
      return path;
    },
  };
}
