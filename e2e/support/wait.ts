// Polling helpers with explicit timeouts for e2e tests.
import { setTimeout as sleep } from 'node:timers/promises';

export { sleep };

export interface WaitOptions {
  /** What is awaited, for the timeout message. */
  description: string;
  timeoutMs?: number;
  intervalMs?: number;
}

/**
 * Polls `check` until it returns a value other than undefined/null/false, and returns that value.
 * Errors thrown by `check` are retried; on timeout the last one is included in the message.
 */
export async function waitFor<T>(
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  { description, timeoutMs = 60_000, intervalMs = 500 }: WaitOptions,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== null && value !== false) return value;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const why = lastError instanceof Error ? `: last error: ${lastError.message}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${description}${why}`);
    }
    await sleep(Math.min(intervalMs, Math.max(0, deadline - Date.now())));
  }
}
