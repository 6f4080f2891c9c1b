// The house rules that hold across the code base, checked over the sources themselves
// (docs/testing.md, docs/architecture.md).
import { describe, expect, it } from "vitest";
import {
  conceptFolderOf,
  faceBreaches,
  importCycles,
  importGraph,
  importsBetween,
  isProduct,
  isTestCode,
} from "./house-imports.js";
import { findSleeps, testFiles } from "./house-sleeps.js";
import { ROOT } from "./harness.js";

/**
 * The only fixed waits left in the tests: each is what its test measures or proves (a time
 * window, an absence, a rate), not a guess at how long something takes. `line` is a piece of the
 * line, so the entry follows the code when lines move; an entry that matches nothing fails too.
 */
const ALLOWED_WAITS: { file: string; line: string; reason: string }[] = [
  {
    file: "tests/delivery-restarts.test.ts",
    line: "const sleepUntil =",
    reason:
      "a load test: replicas are killed on a schedule (every " +
      "KILL_EVERY_MS) and the task rate is measured in windows of wall time",
  },
  {
    file: "tests/epd-output-memory.test.ts",
    line: "setTimeout(r, 100)",
    reason: "samples epd's idle RSS five times over half a second: the spacing of the samples is the measurement",
  },
  {
    file: "tests/attach-dial.test.ts",
    line: "setTimeout(r, 100)",
    reason:
      "proves an absence: a read-only viewer's keys and resize never reach " +
      "the node, 100 ms after later bytes made the round trip the other way",
  },
  {
    file: "tests/fleet-supervise.test.ts",
    line: "setTimeout(r, 700)",
    reason:
      "the watchdog's start grace (EP_WATCHDOG_GRACE_MS=400) is a time window under test: " +
      "a death inside it is a failed start; epd's local status shows no poll time to wait on",
  },
  {
    file: "tests/fleet-supervise.test.ts",
    line: "past the grace of the last restart",
    reason: "as above, for the grace after the restart: only a death after it is restarted",
  },
  {
    file: "tests/fleet-supervise.test.ts",
    line: "three more polls",
    reason: "proves an absence: three watchdog polls (200 ms apart) do not restart a paused agent",
  },
  {
    file: "tests/node-state.test.ts",
    line: "past the start's grace",
    reason:
      "the watchdog's start grace (as in fleet-supervise): a " +
      "death inside it would count as a failed start, not a restart",
  },
  {
    file: "tests/shutdown.test.ts",
    line: "setTimeout(r, 200)",
    reason:
      "the long-polling claim must be in flight in a child-process tower when SIGTERM arrives; that tower " +
      "shows nothing to wait on, and an early SIGTERM fails the test (a refused request), never passes it",
  },
];

describe("tests wait on events", () => {
  const sleeps = findSleeps(ROOT, testFiles(ROOT));
  const allowed = (s: { file: string; text: string }) =>
    ALLOWED_WAITS.find((a) => a.file === s.file && s.text.includes(a.line));

  it("no test sleeps a fixed time: it waits on the condition (test-support/wait.ts) or moves a fake clock", () => {
    const unexplained = sleeps.filter((s) => !allowed(s)).map((s) => `${s.file}:${s.line}: ${s.text}`);
    expect(
      unexplained,
      "use waitFor(condition) or the FakeClock; a wait that is " +
        "itself under test goes into ALLOWED_WAITS with its reason",
    ).toEqual([]);
  });

  it("every allowed wait still exists, once, and says why", () => {
    for (const a of ALLOWED_WAITS) {
      expect(
        sleeps.filter((s) => s.file === a.file && s.text.includes(a.line)),
        `${a.file}: ${a.line}`,
      ).toHaveLength(1);
      expect(a.reason.length).toBeGreaterThan(20);
    }
  });

  it("the finder sees each shape of a fixed sleep", async () => {
    const { mkdtempSync, writeFileSync, mkdirSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { tmpdir } = await import("node:os");
    const root = mkdtempSync(join(tmpdir(), "ep-house-"));
    mkdirSync(join(root, "tests"));
    const shapes = [
      "await new Promise((r) => setTimeout(r, 100));",
      "await new Promise<void>((resolve) => setTimeout(resolve, 50));",
      'import { setTimeout as sleep } from "node:timers/promises";',
      "await sleep(200);",
      "// await new Promise((r) => setTimeout(r, 100)); a comment is not code",
      "await waitFor(() => done);",
      "const t = setTimeout(() => ac.abort(), 300);",
    ];
    writeFileSync(join(root, "tests", "x.test.ts"), shapes.join("\n"));
    expect(findSleeps(root, testFiles(root)).map((s) => s.line)).toEqual([1, 2, 3, 4]);
  });
});

describe("the import graph", () => {
  const graph = importGraph(ROOT);
  // fixtures/ beside a runtime are its tests' stand-ins
  const product = (f: string) => isProduct(f) && !f.includes("/fixtures/");

  it("has no import cycles: each folder's parts import its types module, not the module that wires them", () => {
    expect(importCycles(graph, isProduct)).toEqual([]);
  });

  it(
    "outside a concept folder of tower/domain, product code " + "imports only its face (index.ts) and its types module",
    () => {
      expect(faceBreaches(graph, product)).toEqual([]);
    },
  );

  it("every concept folder of tower/domain has its face, so the rule above covers them all", () => {
    const folders = new Set([...graph.keys()].map(conceptFolderOf).filter((f) => f !== undefined));
    expect([...folders].filter((f) => !graph.has(`tower/domain/${f}/index.ts`))).toEqual([]);
  });

  it("no edge imports the store: edges call the domain, the wiring (tower/app.ts) hands them what they need", () => {
    expect(
      importsBetween(
        graph,
        (f) => product(f) && f.startsWith("tower/edges/"),
        (t) => t.startsWith("tower/store/"),
      ),
    ).toEqual([]);
  });

  it("the CLI reaches the daemon only through its sockets or common/", () => {
    expect(
      importsBetween(
        graph,
        (f) => product(f) && f.startsWith("cli/"),
        (t) => t.startsWith("daemon/"),
      ),
    ).toEqual([]);
  });

  it("a test that starts a tower lives in tests/: tests beside the code do not import the harness", () => {
    const besideTheCode = (f: string) => !f.startsWith("tests/") && /\.test\.tsx?$/.test(f);
    expect(
      importsBetween(graph, besideTheCode, (t) => t === "tests/harness.ts" || t === "tests/epd-harness.ts"),
    ).toEqual([]);
  });

  it("no product file imports test code", () => {
    expect(importsBetween(graph, product, isTestCode)).toEqual([]);
  });

  it("sees imports of every shape, and a cycle", async () => {
    const { mkdtempSync, mkdirSync, writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { tmpdir } = await import("node:os");
    const root = mkdtempSync(join(tmpdir(), "ep-house-"));
    mkdirSync(join(root, "common"));
    writeFileSync(join(root, "common", "a.ts"), 'import type { B } from "./b.js";\nexport const a = 1;\n');
    writeFileSync(
      join(root, "common", "b.ts"),
      'export { a } from "./a.js";\nexport type B = 1;\nconst c = () => import("./c.js");\n',
    );
    writeFileSync(join(root, "common", "c.ts"), '// import { a } from "./a.js";\nimport "./d.js";\n');
    writeFileSync(join(root, "common", "d.ts"), "");
    const g = importGraph(root);
    expect(Object.fromEntries(g)).toEqual({
      "common/a.ts": ["common/b.ts"],
      "common/b.ts": ["common/a.ts", "common/c.ts"],
      "common/c.ts": ["common/d.ts"],
      "common/d.ts": [],
    });
    expect(importCycles(g, isProduct)).toEqual([["common/a.ts", "common/b.ts"]]);
  });

  it("sees an import past a concept folder's face, and none into its face, its types or from within", () => {
    const g = new Map([
      [
        "tower/app.ts",
        [
          "tower/domain/work/index.ts",
          "tower/domain/work/types.ts",
          "tower/domain/work/claims.ts",
          "tower/domain/ai/sessions.ts",
        ],
      ],
      ["tower/domain/work/index.ts", ["tower/domain/work/claims.ts"]],
      ["tower/domain/work/claims.ts", ["tower/domain/work/types.ts", "tower/domain/deps.ts"]],
      ["tower/domain/fleet/push.ts", ["tower/domain/work/context.ts"]],
    ]);
    expect(faceBreaches(g, () => true)).toEqual([
      "tower/app.ts -> tower/domain/work/claims.ts",
      "tower/domain/fleet/push.ts -> tower/domain/work/context.ts",
    ]);
  });
});
