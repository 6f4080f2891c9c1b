// Polling helpers for tests that wait on real processes, sockets and files (real time, short
// interval). Long waits inside the product's logic use FakeClock instead (fake-clock.ts).

/** Polls a condition until it holds or the deadline passes. */
export async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs = 10_000, everyMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Polls a probe until it returns a value (not undefined or false), and returns that value. */
export async function waitForValue<T>(
  probe: () => T | undefined | false,
  timeoutMs = 10_000,
  everyMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`no value within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
