// Where the time goes between a main container's exit and its sidecar's stop, by the agent's own
// clock (the main's exit by the runtime's, on the same node). Only for metrics and logs: nothing is
// decided from it, and it is lost with the process, which is harmless.

/** The exit that completed a Pod's mains, as the fast path saw it. */
export interface ExitSeen {
  /** The runtime's timestamp of the exit; absent when the runtime gives none. */
  mainExitedAtMs?: number;
  /** When that exit event reached the agent. */
  exitEventAtMs: number;
}

/** What the fast path knows of a request it created on seeing the mains exit. */
export interface CreatedOnExit extends ExitSeen {
  /** When the create returned. */
  createdAtMs: number;
  /** How long the create call itself took (a part of exitEvent → created). */
  apiCreateMs: number;
}

/** The milestones of one container's stop. */
export interface StopMilestones {
  /** The request became known to the agent: it created it, or its watch event arrived. */
  knownAtMs: number;
  createdOnExit?: CreatedOnExit;
  /** A stop the fast path began before its request's create returned (R55): no create on its way. */
  stoppedOnExit?: ExitSeen;
  /** The reconcile that ordered the stop began. */
  actingAtMs: number;
  /** Time spent in runtime status calls before the stop. */
  runtimeCheckMs: number;
  /** Absent when no hook ran. */
  prestopDoneAtMs?: number;
  stopSentAtMs: number;
  /** StopContainer returned: the container has exited. */
  exitedAtMs: number;
}

/** Each step's duration in ms (0.1 ms), in order; steps that did not happen are absent. */
export interface StopTimeline {
  exitEvent?: number;
  requestCreated?: number;
  apiCreate?: number;
  acting: number;
  runtimeCheck: number;
  prestopDone?: number;
  stopSent: number;
  containerExited: number;
  /** The main's exit → StopContainer sent (the SIGTERM): the sum of the sequential steps before it. */
  exitToStopSent?: number;
}

const ms = (x: number) => Math.round(Math.max(0, x) * 10) / 10;

export function stopTimeline(m: StopMilestones): StopTimeline {
  const fast = m.createdOnExit;
  const exit = fast ?? m.stoppedOnExit;
  const beforeStop = m.prestopDoneAtMs ?? m.actingAtMs;
  return {
    ...(exit?.mainExitedAtMs !== undefined ? { exitEvent: ms(exit.exitEventAtMs - exit.mainExitedAtMs) } : {}),
    ...(fast ? { requestCreated: ms(fast.createdAtMs - fast.exitEventAtMs), apiCreate: ms(fast.apiCreateMs) } : {}),
    acting: ms(m.actingAtMs - m.knownAtMs),
    runtimeCheck: ms(m.runtimeCheckMs),
    ...(m.prestopDoneAtMs !== undefined ? { prestopDone: ms(m.prestopDoneAtMs - m.actingAtMs) } : {}),
    stopSent: ms(m.stopSentAtMs - beforeStop),
    containerExited: ms(m.exitedAtMs - m.stopSentAtMs),
    ...(exit?.mainExitedAtMs !== undefined ? { exitToStopSent: ms(m.stopSentAtMs - exit.mainExitedAtMs) } : {}),
  };
}

/** When a request became known to this agent, and what the fast path knew of it. */
export interface RequestKnown {
  atMs: number;
  createdOnExit?: CreatedOnExit;
  stoppedOnExit?: ExitSeen;
}

/**
 * When each active request became known to this agent, by uid: it created it on the mains' exit, or
 * its watch event (or the first reconcile that saw it) came first. Only for the step histograms and
 * logs.
 */
export class RequestTimings {
  private readonly byUid = new Map<string, RequestKnown>();

  /** Seen by the watch or a reconcile: the first sighting counts. */
  seen(uid: string, atMs: number): void {
    if (!this.byUid.has(uid)) this.byUid.set(uid, { atMs });
  }

  /** Created by the fast path: known from when the create returned. */
  createdOnExit(uid: string, createdOnExit: CreatedOnExit): void {
    this.byUid.set(uid, { atMs: createdOnExit.createdAtMs, createdOnExit });
  }

  of(uid: string): RequestKnown | undefined {
    return this.byUid.get(uid);
  }

  forget(uid: string): void {
    this.byUid.delete(uid);
  }

  forgetAllBut(activeUids: ReadonlySet<string>): void {
    for (const uid of this.byUid.keys()) if (!activeUids.has(uid)) this.byUid.delete(uid);
  }
}

/** The histograms a stop's timeline feeds. */
export interface StopStepMetrics {
  stopSteps: { observe(labels: { step: string }, seconds: number): void };
  exitToStopSent: { observe(seconds: number): void };
}

export function observeStopSteps(metrics: StopStepMetrics, t: StopTimeline): void {
  metrics.stopSteps.observe({ step: 'acting' }, t.acting / 1000);
  if (t.prestopDone !== undefined) metrics.stopSteps.observe({ step: 'prestop_done' }, t.prestopDone / 1000);
  metrics.stopSteps.observe({ step: 'stop_sent' }, t.stopSent / 1000);
  metrics.stopSteps.observe({ step: 'container_exited' }, t.containerExited / 1000);
  if (t.exitToStopSent !== undefined) metrics.exitToStopSent.observe(t.exitToStopSent / 1000);
}
