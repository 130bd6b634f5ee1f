// The fast path's one way into the Reconciler: a request the agent created on seeing a Pod's mains
// exit, handed over as created (no watch event awaited), with what the runtime said of the
// containers it targets and the exit's timing.
import type { ContainerRecreateRequest } from '../../api/container-recreate-request.ts';
import type { ContainerID } from '../runtime/container-id.ts';
import type { RuntimeContainer } from '../runtime/types.ts';
import type { CreatedOnExit } from '../timeline.ts';

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
   * it comes; undefined when the runtime had no answer, and the reconciler asks itself).
   */
  answers: ReadonlyMap<ContainerID, Promise<RuntimeAnswer | undefined>>;
  timing: CreatedOnExit;
}
