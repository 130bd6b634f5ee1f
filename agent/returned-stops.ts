// Stops this process saw return, by full container ID, answered or failed. containerd deletes a
// container's task before it updates the container's status: in that window (seconds on an
// overloaded node) a stop returns at once while the status still says running. A stop that failed
// (its deadline passed while containerd worked through a burst's exits) may well have stopped the
// container too. Stopping again at once only loops, each time a pair of calls to a runtime already
// behind; so a container whose stop returned is looked at again after a wait that doubles, and
// stopped again only if the runtime still says running then.
// Memory only: a restarted agent resumes a recorded stop once (R40), then waits likewise.

/** The first wait after a stop returned, doubling up to MAX_RECHECK_MS. */
export const FIRST_RECHECK_MS = 5_000;
export const MAX_RECHECK_MS = 60_000;
/** Containers remembered at most (a node's containers are far fewer); the oldest go first. */
const MAX_REMEMBERED = 10_000;

interface Returned {
  atMs: number;
  waitMs: number;
}

export class ReturnedStops {
  readonly #now: () => number;
  readonly #byContainer = new Map<string, Returned>();

  constructor(now: () => number) {
    this.#now = now;
  }

  /** A stop of `containerID` returned just now, answered or failed. */
  returned(containerID: string): void {
    const now = this.#now();
    const before = this.#byContainer.get(containerID);
    this.#byContainer.delete(containerID);
    this.#byContainer.set(containerID, { atMs: now, waitMs: before ? Math.min(before.waitMs * 2, MAX_RECHECK_MS) : FIRST_RECHECK_MS });
    this.#forgetOld(now);
  }

  /** Whether this process has stopped the container before: stopping it again resumes nothing another agent began. */
  stoppedHere(containerID: string): boolean {
    return this.#byContainer.has(containerID);
  }

  /** How long until a container the runtime still reports running may be stopped again; undefined: now. */
  waitLeftMs(containerID: string): number | undefined {
    const r = this.#byContainer.get(containerID);
    if (!r) return undefined;
    const left = r.atMs + r.waitMs - this.#now();
    return left > 0 ? left : undefined;
  }

  /** Drops containers whose last wait ended long ago (stopped for good, or gone), and the oldest past MAX_REMEMBERED. */
  #forgetOld(now: number): void {
    for (const [id, r] of this.#byContainer) {
      if (this.#byContainer.size <= MAX_REMEMBERED && r.atMs + r.waitMs + MAX_RECHECK_MS * 2 > now) break;
      this.#byContainer.delete(id);
    }
  }
}
