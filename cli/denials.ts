// What a task's agent was refused (result.denials), as the CLI and the TUI print it: a run with
// refusals keeps its status, and every surface says "— N tool calls refused" beside it.

/** One entry of a task's `result.denials` as REST/JSON spells it. */
export interface DenialJson {
  tool?: string;
  tried?: string;
  reason?: string;
  source?: string;
  call_id?: string;
}

/** "1 tool call refused", "3 tool calls refused". */
export const refusedText = (n: number): string => `${n} tool call${n === 1 ? "" : "s"} refused`;

/** A task's status with its refusals beside it ("succeeded — 2 tool calls refused"), or the status alone. */
export function statusWithDenials(status: string, count: number): string {
  return count > 0 ? `${status} — ${refusedText(count)}` : status;
}

/** The denials as indented lines: where the refusal came from, the tool and what it tried, then why. */
export function denialLines(denials: readonly DenialJson[]): string[] {
  return denials.map((d) => {
    const tried = d.tried ? ` ${d.tried.replace(/\s+/g, " ")}` : "";
    return (
      `  ${(d.source || "refused").padEnd(12)} ` +
      `${d.tool || "tool"}${tried}${d.reason ? `: ${d.reason.replace(/\s+/g, " ")}` : ""}`
    );
  });
}
