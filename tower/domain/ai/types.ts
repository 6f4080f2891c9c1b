// The AI console's shared types: its settings, as the sessions and the tool executor read them.
import type { RUNTIME_KINDS } from "../../../common/runtimes.js";

export type Runtime = (typeof RUNTIME_KINDS)[number];

export interface ClaudeRuntimeSettings {
  /** EP_CLAUDE_MODEL */
  model?: string;
  /** EP_CLAUDE_MAX_TOKENS */
  max_tokens?: number;
  /** EP_CLAUDE_TIMEOUT_SECONDS */
  timeout_seconds?: number;
}

export interface AiSettings {
  /** EP_CENTRAL_RUNTIME_DEFAULT (recommended vendorA_code); undefined leaves it to the task defaults. */
  centralRuntimeDefault?: Runtime;
  /** Settings to put on work for the vendorA_code runtime (e.g. under the task's input). */
  claude: ClaudeRuntimeSettings;
}
