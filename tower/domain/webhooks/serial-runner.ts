// Runs an async job one at a time: a run asked for while one is going is coalesced into one more
// run after it (so nothing asked for is lost, and nothing runs twice at once).
export interface SerialRunner {
  run(): void;
  /** Resolves when no run is going. */
  idle(): Promise<void>;
  /** No further runs (the one going finishes). */
  stop(): void;
}

export function serialRunner(job: () => Promise<void>): SerialRunner {
  let going: Promise<void> | undefined;
  let again = false;
  let stopped = false;
  return {
    run() {
      if (stopped) return;
      if (going) {
        again = true;
        return;
      }
      going = (async () => {
        do {
          again = false;
          await job();
        } while (again && !stopped);
      })().finally(() => (going = undefined));
    },
    async idle() {
      while (going) await going;
    },
    stop() {
      stopped = true;
    },
  };
}
