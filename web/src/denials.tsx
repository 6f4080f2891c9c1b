// What a task's agent was refused (result.denials, docs/runtimes.md "Refused tools"): an amber
// badge beside the status ("succeeded with 2 refusals": never a plain green) and a Denials section
// listing each refusal: where it came from, the tool and what it tried, and why.
import { enumWord } from "@common/vocab.js";
import { DenialSourceSchema, type Denial } from "@gen/ep/tower/v1/resources_pb.js";
import { StatusBadge } from "./ui.js";

const SOURCE_LABEL: Record<string, string> = {
  policy: "CLI permission rules",
  sandbox: "sandbox",
  unknown_tool: "unknown tool",
  person: "a person",
};

/**
 * The task's status badge, refusals included: a succeeded run with refusals is an amber "succeeded
 * with 1 refusal" instead of the green badge; any other status keeps its badge and gets an amber
 * "2 refusals" beside it.
 */
export function TaskStatusBadge({ status, denials }: { status: string; denials: readonly Denial[] }) {
  const n = denials.length;
  if (!n) return <StatusBadge status={status} />;
  const refusals = `${n} refusal${n === 1 ? "" : "s"}`;
  const title = "the agent was refused tool calls; see Denials";
  if (status === "succeeded" || status === "done") {
    return (
      <span className="badge badge-warn denials-badge" title={title}>
        {status} with {refusals}
      </span>
    );
  }
  return (
    <>
      <StatusBadge status={status} />{" "}
      <span className="badge badge-warn denials-badge" title={title}>
        {refusals}
      </span>
    </>
  );
}

export function DenialsSection({ denials }: { denials: readonly Denial[] }) {
  if (!denials.length) return null;
  return (
    <section aria-labelledby="denials-heading" className="denials">
      <h3 id="denials-heading">
        Denials{" "}
        <span className="muted small">
          {denials.length} tool call{denials.length === 1 ? "" : "s"} the agent could not make
        </span>
      </h3>
      <ol className="denial-list">
        {denials.map((d, i) => {
          const source = enumWord(DenialSourceSchema, d.source);
          return (
            <li key={`${d.callId}-${i}`} className="denial" data-source={source}>
              <span className="badge badge-warn">{SOURCE_LABEL[source] ?? (source || "refused")}</span>{" "}
              <strong>{d.tool}</strong>
              {d.tried && <code className="denial-tried">{d.tried}</code>}
              {d.reason && <p className="denial-reason">{d.reason}</p>}
            </li>
          );
        })}
      </ol>
    </section>
  );
}
