// What run.ts drives: one system (EP or a peer) set up fresh for one scenario, with its
// processes, a way to count the outcomes it has committed, and a way to read when each job
// started.
import type { CpuTargets } from "./cpu.js";
import type { Child } from "./child.js";
import type { System } from "./peer-config.js";

export interface StartTimes {
  /** submit → start of each job, ms: the handler's first line (peers) or epd's run (EP) */
  start: number[];
  /** a second observable where the system has one (EP: the tower's commit of task.running) */
  alt?: { what: string; values: number[] };
}

export interface SystemRun {
  system: System;
  submitter: Child;
  cpu: Omit<CpuTargets, "submitter">;
  /** how many jobs' outcomes are committed so far; `submitted` is how many were submitted in all */
  committed(submitted: number): Promise<number>;
  /** submit→start of the `count` jobs submitted under `label` (`started`: their ids and submit times) */
  startTimes(label: string, count: number, started: [string, number][]): Promise<StartTimes>;
  /** what its outcomes were (EP: by task status), for the notes; undefined when nothing to say */
  outcomes?(): Promise<Record<string, number>>;
  close(): Promise<void>;
}

export interface SetupOptions {
  concurrency: number;
  /** the latency scenario: EP's epd logs each run (info), the observable of its start */
  latency: boolean;
  pgUrl: string;
  redisUrl: string;
  pgBossBatch: number;
  /** this bench run's mark in application_name, schema names and Redis keys */
  runId: string;
  /** epd's EP_LINK (session: one HTTP/2 stream both ways; http1: the link plus unary calls); unset: epd's default */
  epLink?: "session" | "http1";
}

export const DISPLAY: Record<System, string> = {
  bullmq: "BullMQ (Redis)",
  "pg-boss": "pg-boss (PostgreSQL)",
  "graphile-worker": "graphile-worker (PostgreSQL)",
  "ep-sqlite": "EP, SQLite",
  "ep-pg": "EP, PostgreSQL",
};

/** `url` with an application_name, so the CPU sampler can tell this run's backends from others'. */
export function withAppName(url: string, name: string): string {
  const u = new URL(url);
  u.searchParams.set("application_name", name);
  return u.toString();
}
