// The fast path's ways into the Reconciler: the stop of a request it is about to create, begun at
// once (R55), and the request it created on seeing a Pod's mains exit, handed over as created (no
// watch event awaited), with what the runtime said of the containers it targets and the exit's timing.
import type { ContainerRecreateRequest } from '../../api/container-recreate-request.ts';
import type { ContainerID } from '../../api/container-id.ts';
import type { RuntimeContainer } from '../runtime/types.ts';
import type { CreatedOnExit, ExitSeen } from '../timeline.ts';

/** What the runtime said of a container, and when the answer arrived (its freshness counts from then). */
export interface RuntimeAnswer {
  container: RuntimeContainer;
  atMs: number;
}

export interface Handoff {
  /** The request as the create returned it. */
  request: ContainerRecreateRequest;
  /**
   * By target: the runtime's answer, asked while the API server stored the request (pending while
   * it comes; undefined when the runtime had no answer, and the reconciler asks itself), or made
   * from the kubelet labels read ahead and the exits announced as the create returned.
   */
  answers: ReadonlyMap<ContainerID, Promise<RuntimeAnswer | undefined>>;
  timing: CreatedOnExit;
}

/** A request the fast path is creating, whose stops begin before the create returns (R55). */
export interface FirstStop {
  /** The request as sent to the create. */
  request: ContainerRecreateRequest;
  /** By target: the runtime's answer, as handed over with the request once created. */
  answers: ReadonlyMap<ContainerID, Promise<RuntimeAnswer | undefined>>;
  exit: ExitSeen;
}

/**
 * How old a runtime answer handed over may be and still be used, from when it arrived: a
 * container's labels never change; its state may, and an exited container's stop does nothing.
 * Older, the runtime is asked again.
 */
const ANSWER_FRESH_MS = 1_000;

/**
 * What the Reconciler keeps of the hand-offs' runtime answers: each until the reconcile that first
 * plans a stop of its container takes it (the requests are kept with what this agent wrote ahead of
 * the watch, agent/ahead-of-watch.ts).
 */
export class HandedOver {
  /** By `<runtime>://<id>`, with when it was handed over. */
  private readonly answers = new Map<string, { handedAtMs: number; answer: Promise<RuntimeAnswer | undefined> }>();
  private readonly now: () => number;

  constructor(now: () => number) {
    this.now = now;
  }

  accept({ request, answers }: Handoff): void {
    if (!request.metadata.uid) return;
    const handedAtMs = this.now();
    for (const [containerID, answer] of answers) this.answers.set(containerID, { handedAtMs, answer });
  }

  /** The answer handed over for the container (awaited if still coming), once, when fresh enough to use. */
  async takeAnswer(containerID: string): Promise<RuntimeContainer | undefined> {
    const entry = this.answers.get(containerID);
    if (!entry) return undefined;
    this.answers.delete(containerID);
    return usableAnswer(await entry.answer, this.now());
  }

  /** Drops the answers handed over too long ago to be used. */
  forgetStale(): void {
    for (const [id, { handedAtMs }] of this.answers) if (this.now() - handedAtMs > ANSWER_FRESH_MS) this.answers.delete(id);
  }
}

/** The container an answer tells of, when it is fresh enough to act on. */
export function usableAnswer(answer: RuntimeAnswer | undefined, nowMs: number): RuntimeContainer | undefined {
  return answer && nowMs - answer.atMs <= ANSWER_FRESH_MS ? answer.container : undefined;
}
