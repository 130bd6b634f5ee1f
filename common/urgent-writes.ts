// Writes something waits on go first: while any is in flight, writes that can wait (events) hold
// back, so they do not queue in front of it at the API server. The agent's creates gate its stops;
// under ten Pods finishing together, its events were twice as many writes as its creates.
export class UrgentWrites {
  private inFlight = 0;
  private waiters: (() => void)[] = [];

  async run<T>(write: () => Promise<T>): Promise<T> {
    this.inFlight++;
    try {
      return await write();
    } finally {
      if (--this.inFlight === 0) for (const resolve of this.waiters.splice(0)) resolve();
    }
  }

  busy(): boolean {
    return this.inFlight > 0;
  }

  /** Resolves once no urgent write is in flight. */
  settled(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}
