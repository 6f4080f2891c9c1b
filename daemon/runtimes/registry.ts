// Builds every runtime adapter from one RuntimesConfig and tracks live runs so close() can end them.
import { systemClock, type Clock } from "../../common/clock.js";
import { EpError, invalidField } from "../../common/errors.js";
import { silentLogger, type Logger } from "../../common/log.js";
import { createMuxhostHostedRuntime } from "./muxhost-hosted.js";
import { createProcessRuntime, type ProcessRuntimeOptions, type StreamParser } from "./process-runtime.js";
import {
  RUNTIME_KINDS,
  isRuntimeKind,
  type RunHandle,
  type RunSpec,
  type RuntimeAdapter,
  type RuntimeKind,
} from "./runtime.js";
import type { CommandRuntimeConfig, RuntimesConfig } from "./runtimes-config.js";
import type { SpawnFn } from "./spawner.js";
import { createShellRuntime } from "./shell.js";
import { createVendorAAgentAcpRuntime } from "./vendor-a-agent-acp.js";
import { createVendorACodeParser, vendorACodeRun } from "./vendor-a-code.js";
import { createVendorBParser, vendorBRun } from "./vendor-b.js";
import { createVendorCParser, vendorCRun } from "./vendor-c.js";
import { claudeRefusals, codexRefusals, geminiRefusals, refusing } from "./cli-refusals.js";

export interface RuntimeRegistryDeps {
  clock?: Clock;
  logger?: Logger;
  /** How command runtimes start their process (epd: its spawn helper) */
  spawn?: SpawnFn;
}

export interface RuntimeRegistry {
  /** The config in use (replaced by reload). */
  readonly config: RuntimesConfig;
  /** Uses `config` for every run started from now on; runs already going keep theirs (config_reload). */
  reload(config: RuntimesConfig): void;
  kinds(): RuntimeKind[];
  /** The adapter of a kind; an unknown kind is an `invalid_argument` naming `runtime`. */
  get(kind: string): RuntimeAdapter;
  /** Starts a run and tracks it until its result settles. */
  start(kind: string, spec: RunSpec): RunHandle;
  /** Runs not yet finished. */
  active(): number;
  /** Cancels every live run and waits for their process groups to be gone. */
  close(): Promise<void>;
}

export function createRuntimeRegistry(config: RuntimesConfig, deps: RuntimeRegistryDeps = {}): RuntimeRegistry {
  const d = { clock: deps.clock ?? systemClock, logger: (deps.logger ?? silentLogger).child({ part: "runtimes" }) };
  const spawn = deps.spawn ? { spawn: deps.spawn } : {};
  const agentCli = (
    kind: RuntimeKind,
    cfg: CommandRuntimeConfig,
    parser: (env: Record<string, string>) => StreamParser,
    extend?: ProcessRuntimeOptions["extend"],
  ) =>
    createProcessRuntime({
      kind,
      config: cfg,
      ...d,
      ...spawn,
      parser,
      validate: (spec) =>
        spec.prompt.trim() === "" ? invalidField("prompt", `must not be empty for runtime ${kind}`) : undefined,
      extend,
    });
  const build = (config: RuntimesConfig): Record<RuntimeKind, RuntimeAdapter> => ({
    vendorA_code: agentCli(
      "vendorA_code",
      config.vendorA_code,
      refusing(createVendorACodeParser, claudeRefusals),
      vendorACodeRun,
    ),
    vendorA_agent_acp: createVendorAAgentAcpRuntime(config.vendorA_agent_acp, d),
    vendorB: agentCli("vendorB", config.vendorB, refusing(createVendorBParser, codexRefusals), vendorBRun),
    vendorC: agentCli("vendorC", config.vendorC, refusing(createVendorCParser, geminiRefusals), vendorCRun),
    muxhost_hosted: createMuxhostHostedRuntime(config.muxhost_hosted, d),
    shell: createShellRuntime(config.shell, { ...d, ...spawn }),
  });
  let current = config;
  let adapters = build(config);
  const live = new Set<RunHandle>();
  let closed = false;

  const get = (kind: string): RuntimeAdapter => {
    if (!isRuntimeKind(kind))
      throw invalidField("runtime", `unknown runtime '${kind}' (known: ${RUNTIME_KINDS.join(", ")})`);
    return adapters[kind];
  };

  return {
    get config() {
      return current;
    },
    reload(next) {
      adapters = build(next);
      current = next;
    },
    kinds: () => [...RUNTIME_KINDS],
    get,
    start(kind, spec) {
      if (closed) throw new EpError("unavailable", "the runtime registry is closed (the daemon is shutting down)");
      const handle = get(kind).start(spec);
      live.add(handle);
      void handle.result.finally(() => live.delete(handle));
      return handle;
    },
    active: () => live.size,
    async close() {
      closed = true;
      await Promise.all([...live].map((h) => h.cancel("the daemon is shutting down")));
    },
  };
}
