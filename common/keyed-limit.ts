// At most `limit` tasks at once per key; the rest wait their turn, first come first served. A key
// holds memory only while it has tasks running or waiting.
export class KeyedLimit {
  private readonly limit: number;
  private readonly keys = new Map<string, { running: number; waiting: (() => void)[] }>();

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`KeyedLimit: limit must be a positive integer, got ${limit}`);
    this.limit = limit;
  }

  /** Runs `task` once fewer than `limit` tasks of `key` run; settles as it does. */
  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    let entry = this.keys.get(key);
    if (!entry) {
      entry = { running: 0, waiting: [] };
      this.keys.set(key, entry);
    }
    if (entry.running >= this.limit) await new Promise<void>((resolve) => entry!.waiting.push(resolve));
    else entry.running++;
    try {
      return await task();
    } finally {
      // A waiting task takes over this slot, so `running` stays as it is.
      const next = entry.waiting.shift();
      if (next) next();
      else if (--entry.running === 0) this.keys.delete(key);
    }
  }

  /** Tasks of `key` running now (0 once it has none left: its entry is gone). */
  running(key: string): number {
    return this.keys.get(key)?.running ?? 0;
  }
}
