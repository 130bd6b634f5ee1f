// Stops this process saw return, by full container ID, answered or failed. containerd deletes a
// container's task before it updates the container's status: in that window (seconds on an
// overloaded node) a stop returns at once while the status still says running. A stop that failed
// (its deadline passed while containerd worked through a burst's exits) may well have stopped the
// container too. Stopping again at once only loops, each time a pair of calls to a runtime already
// behind; so a container whose stop returned is looked at again after a wait that doubles, and
// stopped again only if the runtime still says running then. Nor then if the runtime's exit stream
// reported the container's process exited: its status lags that event (under a burst of exits, for
// tens of seconds), and a process that exited never runs again under the same container ID.
// Memory only: a restarted agent resumes a recorded stop once (R40), then waits likewise.

/** The first wait after a stop returned, doubling up to MAX_RECHECK_MS. */
export const FIRST_RECHECK_MS = 5_000;
export const MAX_RECHECK_MS = 60_000;
/** Containers remembered at most (a node's containers are far fewer); the oldest go first. */
const MAX_REMEMBERED = 10_000;
/** How long an exit the runtime reported is remembered: far longer than its status ever lagged. */
const EXIT_REMEMBERED_MS = 10 * 60_000;

interface Returned {
  atMs: number;
  waitMs: number;
}

export class ReturnedStops {
  readonly #now: () => number;
  readonly #byContainer = new Map<string, Returned>();
  /** When the runtime's exit stream reported each container's process exited (it may come before its stop returns). */
  readonly #exited = new Map<string, number>();

  constructor(now: () => number) {
    this.#now = now;
  }

  /** A stop of `containerID` returned just now, answered or failed. */
  returned(containerID: string): void {
    const now = this.#now();
    const before = this.#byContainer.get(containerID);
    this.#byContainer.delete(containerID);
    this.#byContainer.set(containerID, { atMs: now, waitMs: before ? Math.min(before.waitMs * 2, MAX_RECHECK_MS) : FIRST_RECHECK_MS });
    // Containers whose last wait ended long ago: stopped for good, or gone.
    dropOldest(this.#byContainer, (r) => r.atMs + r.waitMs + MAX_RECHECK_MS * 2 <= now);
  }

  /** Whether this process has stopped the container before: stopping it again resumes nothing another agent began. */
  stoppedHere(containerID: string): boolean {
    return this.#byContainer.has(containerID);
  }

  /** The runtime's exit stream reported the container's own process exited just now. */
  exited(containerID: string): void {
    const now = this.#now();
    this.#exited.delete(containerID);
    this.#exited.set(containerID, now);
    dropOldest(this.#exited, (atMs) => atMs + EXIT_REMEMBERED_MS <= now);
  }

  /** Whether the runtime's exit stream reported the container's own process exited. */
  exitReported(containerID: string): boolean {
    return this.#exited.has(containerID);
  }

  /**
   * How long until a container the runtime still reports running may be stopped again; undefined:
   * now. One whose exit was reported is never stopped again: when its wait ends, another begins
   * (doubling), so it is looked at again until its status says exited.
   */
  waitLeftMs(containerID: string): number | undefined {
    const r = this.#byContainer.get(containerID);
    if (!r) return undefined;
    const left = r.atMs + r.waitMs - this.#now();
    if (left > 0) return left;
    if (!this.exitReported(containerID)) return undefined;
    this.returned(containerID);
    return this.#byContainer.get(containerID)!.waitMs;
  }
}

/**
 * Drops entries oldest first (a Map keeps the order they were set in; each is set anew when
 * refreshed) while they are `expired` or more than MAX_REMEMBERED are kept.
 */
function dropOldest<V>(byContainer: Map<string, V>, expired: (value: V) => boolean): void {
  for (const [id, value] of byContainer) {
    if (byContainer.size <= MAX_REMEMBERED && !expired(value)) break;
    byContainer.delete(id);
  }
}
