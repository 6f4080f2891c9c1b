// A mission's tasks that wait for one another (depends_on; docs/pipelines.md) drawn as a graph:
// dagre lays the steps out left to right, each box shows the step and its state, each arrow goes
// from a parent to the task that waits for it. The tasks come from the dashboard, which reloads
// them on every task event, so the states change live.
import dagre from "@dagrejs/dagre";
import { useMemo } from "react";
import type { Task } from "@gen/ep/tower/v1/resources_pb.js";
import { statusOf } from "./words.js";
import { toneOf } from "./ui.js";

const NODE_W = 150;
const NODE_H = 48;

interface Laid {
  nodes: { task: Task; x: number; y: number }[];
  edges: { from: string; to: string; points: { x: number; y: number }[] }[];
  width: number;
  height: number;
}

/** Whether a mission's tasks form a graph worth drawing: some task waits for another. */
export function hasDependencies(list: readonly Task[]): boolean {
  return list.some((t) => t.dependsOn.length > 0);
}

function layoutOf(list: readonly Task[]): Laid {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: 24, ranksep: 56, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set(list.map((t) => t.id));
  for (const t of list) g.setNode(t.id, { width: NODE_W, height: NODE_H });
  // a parent in another mission has no box here; its edge is left out
  for (const t of list) for (const p of t.dependsOn) if (ids.has(p)) g.setEdge(p, t.id);
  dagre.layout(g);
  const byId = new Map(list.map((t) => [t.id, t]));
  const graph = g.graph();
  return {
    nodes: g.nodes().map((id) => ({ task: byId.get(id)!, x: g.node(id).x, y: g.node(id).y })),
    edges: g.edges().map((e) => ({ from: e.v, to: e.w, points: g.edge(e).points ?? [] })),
    width: Math.ceil(graph.width ?? NODE_W),
    height: Math.ceil(graph.height ?? NODE_H),
  };
}

export function PipelineGraph({ title, list, navigate }: { title: string; list: Task[]; navigate(to: string): void }) {
  // the layout depends on the tasks and their edges, not on their states
  const shape = list.map((t) => `${t.id}<${t.dependsOn.join(",")}`).join(";");
  // biome-ignore lint/correctness/useExhaustiveDependencies: laid out again only when the shape changes
  const laid = useMemo(() => layoutOf(list), [shape]);
  const current = new Map(list.map((t) => [t.id, t]));
  return (
    <figure className="pipeline-graph" aria-label={`Steps of ${title}`}>
      <svg
        width={laid.width}
        height={laid.height}
        viewBox={`0 0 ${laid.width} ${laid.height}`}
        role="img"
        aria-label={`Graph of the steps of ${title}`}
      >
        <defs>
          <marker
            id="pipeline-arrow"
            viewBox="0 0 10 10"
            refX="9"
            refY="5"
            markerWidth="7"
            markerHeight="7"
            orient="auto-start-reverse"
          >
            <path d="M 0 0 L 10 5 L 0 10 z" className="pipeline-arrow" />
          </marker>
        </defs>
        {laid.edges.map((e) => (
          <polyline
            key={`${e.from}-${e.to}`}
            className="pipeline-edge"
            data-from={e.from}
            data-to={e.to}
            points={e.points.map((p) => `${p.x},${p.y}`).join(" ")}
            markerEnd="url(#pipeline-arrow)"
          />
        ))}
        {laid.nodes.map(({ task: laidTask, x, y }) => {
          const t = current.get(laidTask.id) ?? laidTask;
          const status = statusOf(t);
          const name = t.step || t.title;
          const waits = t.waitingOn.map((id) => current.get(id)?.step || current.get(id)?.title || id);
          return (
            <g
              key={t.id}
              className={`pipeline-node tone-${toneOf(status)}`}
              data-task-id={t.id}
              data-status={status}
              transform={`translate(${x - NODE_W / 2}, ${y - NODE_H / 2})`}
              role="link"
              tabIndex={0}
              aria-label={`${name}: ${status}${waits.length ? `, waiting on ${waits.join(", ")}` : ""}`}
              onClick={() => navigate(`/ui/tasks/${t.id}`)}
              onKeyDown={(e) => e.key === "Enter" && navigate(`/ui/tasks/${t.id}`)}
            >
              <title>{`${t.title} (${t.id})${t.result?.error ? ` — ${t.result.error}` : ""}`}</title>
              <rect width={NODE_W} height={NODE_H} rx={8} />
              <text x={10} y={19} className="pipeline-name">
                {name.length > 20 ? `${name.slice(0, 19)}…` : name}
              </text>
              <text x={10} y={37} className="pipeline-status">
                {status}
              </text>
            </g>
          );
        })}
      </svg>
    </figure>
  );
}
