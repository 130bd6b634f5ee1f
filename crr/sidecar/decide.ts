// The pure decision for one Pod (spec sections 2-5), computed from its full current state.
import type { Classification, NodeKind, Sidecar } from './classify.ts';
import { classify, isStoppableOn, notStoppableWarning } from './classify.ts';
import { ANNOTATION_IGNORE_EXIT_CODE, ENV_IGNORE_EXIT_CODE, ENV_TERMINATE_WHEN_JOB_EXIT, EVENT_REASONS } from './constants.ts';
import type { CreateRequest, Decision, NotHandled, NotHandledReason, Wait, WaitReason } from './decision.ts';
import type { PodEvent } from './events.ts';
import { normal, quoteList, warning } from './events.ts';
import { allMainsSucceeded, phasePatch } from './phase.ts';
import type { ContainerStatusProjection, PodProjection } from './projection.ts';
import type { ExistingRequest, ExistingRequestContainer, SidecarTerminatorOptions } from './requests.ts';
import { buildTerminationRequest, DEFAULT_OPTIONS, requestAttempt, requestName, retryDelaySeconds } from './requests.ts';

export interface DecideContext {
  /** Existing requests for this Pod (e.g. listed by the pod-uid label); only our own names count. */
  requests: readonly ExistingRequest[];
  nowMs: number;
  options?: SidecarTerminatorOptions;
}

/** One of our requests, with its attempt number parsed from its name. */
type OwnRequest = ExistingRequest & { attempt: number };

interface Facts {
  pod: PodProjection;
  classification: Classification;
  /** Sidecars whose current state is not terminated. */
  running: Sidecar[];
  context: DecideContext;
  options: SidecarTerminatorOptions;
  /** Events every decision from here on carries. */
  events: PodEvent[];
}

export function decide(pod: PodProjection, node: NodeKind, context: DecideContext): Decision {
  if (pod.deleting) return notHandled('deleting', 'Pod is being deleted', []);
  if (pod.restartPolicy !== 'Never' && pod.restartPolicy !== 'OnFailure') {
    return notHandled('restartPolicyAlways', `restartPolicy ${pod.restartPolicy}: kubelet restarts containers`, []);
  }
  const classification = classify(pod);
  const events = [...classification.warnings];
  if (pod.phase === 'Pending') return notHandled('pending', 'Pod is Pending', events);
  if (classification.sidecars.length === 0) return notHandled('noSidecar', 'no sidecar container', events);
  const running = classification.sidecars.filter((s) => !isTerminated(pod, s.name));
  if (running.length === 0) {
    const failed = sidecarFailedPodWarnings(pod, classification);
    return notHandled('noRunningSidecar', 'every sidecar has terminated', [...events, ...failed]);
  }
  if (!statusesComplete(pod)) return notHandled('statusesIncomplete', 'a container has no status yet', events);
  if (!mainsDone(pod, classification.mains)) return notHandled('mainsNotDone', 'main containers not done', events);
  events.push(...sidecarFailedPodWarnings(pod, classification));
  const facts = { pod, classification, running, context, options: context.options ?? DEFAULT_OPTIONS, events };
  if (pod.phase === 'Succeeded' || pod.phase === 'Failed') {
    // Exit codes no longer matter: kubelet never leaves a terminal phase. It would stop the rest
    // itself, but only at its next periodic sync (up to a minute); on a real node we stop them now.
    if (node === 'real') return requestStops(facts, running.filter((s) => isStoppableOn(s, 'real')));
    return wait('podTerminal', `phase ${pod.phase}: kubelet stops the remaining containers`, events, running);
  }
  return node === 'real' ? decideOnRealNode(facts) : decideOnVirtualNode(facts);
}

// ---- section 2: when a Pod is handled ----

function statusOf(pod: PodProjection, name: string): ContainerStatusProjection | undefined {
  return pod.statuses.find((s) => s.name === name);
}

function isTerminated(pod: PodProjection, name: string): boolean {
  return statusOf(pod, name)?.state.kind === 'terminated';
}

function statusesComplete(pod: PodProjection): boolean {
  return pod.containers.every((c) => statusOf(pod, c.name) !== undefined);
}

/** Only the current state and exit code count; never lastState or timestamps. */
function mainsDone(pod: PodProjection, mains: readonly string[]): boolean {
  return mains.every((name) => {
    const state = statusOf(pod, name)?.state;
    if (state?.kind !== 'terminated') return false;
    // Never: any exit releases the sidecars. OnFailure: kubelet restarts a failed main.
    return pod.restartPolicy === 'Never' || state.exitCode === 0;
  });
}

// ---- section 3: real nodes ----

function decideOnRealNode(facts: Facts): Decision {
  const { pod, running, events } = facts;
  const own = ownRequests(pod, facts.context.requests);
  const loop = restartLoop(facts, own);
  if (loop) return loop;

  const ignoring = running.filter((s) => s.ignoreExitCode);
  const others = running.filter((s) => !s.ignoreExitCode);
  if (ignoring.length > 0 && others.length === 0) return ignoreExitCodePatch(facts, ignoring);

  const stoppable = others.filter((s) => isStoppableOn(s, 'real'));
  events.push(...others.filter((s) => !isStoppableOn(s, 'real')).map((s) => notStoppableWarning(pod, s, 'real')));
  return requestStops(facts, stoppable, own);
}

/** A request for the stoppable sidecars that have a container ID, unless one is under way. */
function requestStops(facts: Facts, stoppable: Sidecar[], own = ownRequests(facts.pod, facts.context.requests)): Decision {
  const { pod, events } = facts;
  if (stoppable.length === 0) {
    return notHandled('noStoppableSidecar', 'no running sidecar can be stopped on a real node', events);
  }
  const active = own.find((r) => !r.completed);
  if (active) {
    return { ...wait('requestActive', `request ${active.name} is in progress`, events, stoppable), requestName: active.name };
  }
  const withId = stoppable.filter((s) => statusOf(pod, s.name)?.containerID);
  const withoutId = stoppable.filter((s) => !statusOf(pod, s.name)?.containerID);
  if (withId.length === 0) return wait('containerIds', 'sidecars have no container ID yet', events, withoutId);
  return createRequest(facts, own, withId.map((s) => s.name), withoutId.map((s) => s.name));
}

function ownRequests(pod: PodProjection, requests: readonly ExistingRequest[]): OwnRequest[] {
  return requests.flatMap((r) => {
    const attempt = requestAttempt(pod.uid, r.name);
    return attempt === undefined ? [] : [{ ...r, attempt }];
  });
}

function latestOf(requests: readonly OwnRequest[]): OwnRequest | undefined {
  return requests.reduce<OwnRequest | undefined>((a, r) => (a && a.attempt >= r.attempt ? a : r), undefined);
}

function createRequest(facts: Facts, own: readonly OwnRequest[], containers: string[], waitingForId: string[]): CreateRequest {
  const { pod, options, events } = facts;
  const latest = latestOf(own);
  const attempt = (latest?.attempt ?? 0) + 1;
  const request = buildTerminationRequest(pod, containers, attempt, options);
  const name = requestName(pod.uid, attempt);
  const completed = own.filter((r) => r.completed);
  const askedBefore = new Set(completed.flatMap((r) => r.containers.map((c) => c.name)));
  const retried = containers.filter((c) => askedBefore.has(c));
  // The request that last asked for one of them: the one that did not do its job.
  const previous = latestOf(completed.filter((r) => r.containers.some((c) => retried.includes(c.name))));
  // A sidecar never asked to stop goes at once; only a pure retry waits for the backoff.
  const delaySeconds = previous && retried.length === containers.length ? retryDelaySeconds(attempt, options) : 0;
  const delayMs = previous && delaySeconds > 0 ? remainingMs(previous, delaySeconds, facts.context.nowMs) : 0;
  const stopping = normal(
    EVENT_REASONS.stopping,
    `${EVENT_REASONS.stopping}/${name}`,
    `Main containers are done; stopping sidecar${plural(containers)} ${quoteList(containers)} with ContainerRecreateRequest ${name}.` +
      (waitingForId.length > 0
        ? ` Waiting for ${quoteList(waitingForId)} to start before stopping ${waitingForId.length === 1 ? 'it' : 'them'} too.`
        : ''),
  );
  const retryEvents = previous ? [retryWarning(previous, retried, name, attempt, delaySeconds)] : [];
  return {
    kind: 'createRequest',
    attempt,
    request,
    containers,
    delayMs,
    ...(previous ? { retryOf: previous.name } : {}),
    waitingForContainerId: waitingForId,
    events: [...events, ...retryEvents, stopping],
    message: `create ${name} for ${containers.join(',')}${delayMs > 0 ? ` in ${delayMs} ms` : ''}`,
  };
}

/** Backoff counted from the previous request's completion; no known time means no wait. */
function remainingMs(previous: ExistingRequest, delaySeconds: number, nowMs: number): number {
  const since = previous.completionTimeMs ?? previous.creationTimeMs;
  if (since === undefined) return 0;
  return Math.max(0, since + delaySeconds * 1000 - nowMs);
}

function retryWarning(previous: ExistingRequest, retried: string[], name: string, attempt: number, delaySeconds: number): PodEvent {
  const why = requestOutcome(previous, retried);
  return warning(
    EVENT_REASONS.retrying,
    `${EVENT_REASONS.retrying}/${name}`,
    `ContainerRecreateRequest ${previous.name} completed but sidecar${plural(retried)} ${quoteList(retried)} ` +
      `${retried.length === 1 ? 'is' : 'are'} still running${why}; retrying with ${name} (attempt ${attempt}` +
      `${delaySeconds > 0 ? `, after a ${delaySeconds}s backoff` : ''}).`,
  );
}

/** What the previous request said about itself and the retried containers. */
function requestOutcome(request: ExistingRequest, names: readonly string[]): string {
  const details = request.containers
    .filter((c) => names.includes(c.name) && c.state?.message)
    .map((c) => `${c.name}: ${c.state?.message}`);
  const parts = [request.message, ...details].filter((p): p is string => Boolean(p));
  return parts.length > 0 ? ` (${parts.join('; ')})` : '';
}

// ---- section 4: virtual nodes ----

function decideOnVirtualNode(facts: Facts): Decision {
  const { pod, running, events } = facts;
  const stoppable = running.filter((s) => isStoppableOn(s, 'virtual'));
  events.push(...running.filter((s) => !isStoppableOn(s, 'virtual')).map((s) => notStoppableWarning(pod, s, 'virtual')));
  if (stoppable.length === 0) {
    return notHandled('noStoppableSidecar', 'no running sidecar can be stopped on a virtual node', events);
  }
  const swaps = stoppable.flatMap((s) => {
    const from = pod.containers.find((c) => c.name === s.name)?.image ?? '';
    // Already swapped: the spec carries the target image, kubelet is replacing the container.
    return s.swapImage === undefined || from === s.swapImage ? [] : [{ container: s.name, from, to: s.swapImage }];
  });
  if (swaps.length === 0) return wait('imageSwapInProgress', 'images already swapped', events, stoppable);
  const names = swaps.map((s) => s.container);
  const key = swaps.map((s) => `${s.container}=${s.to}`).join(',');
  const event = normal(
    EVENT_REASONS.replacingImage,
    `${EVENT_REASONS.replacingImage}/${key}`,
    `Main containers are done; stopping sidecar${plural(names)} by replacing ` +
      swaps.map((s) => `the image of "${s.container}" with ${s.to}`).join(', ') +
      ' (virtual node: the new container exits at once).',
  );
  return { kind: 'swapImages', swaps, events: [...events, event], message: `swap images of ${names.join(',')}` };
}

// ---- section 5: exit codes and the phase ----

function ignoreExitCodePatch(facts: Facts, ignoring: readonly Sidecar[]): Decision {
  const names = ignoring.map((s) => s.name);
  const failedSidecars = failedCountingSidecars(facts);
  const text = (phase: string): string =>
    `Phase set to ${phase} by sidecar-terminator: the main containers are done` +
    `${allMainsSucceeded(facts.pod) ? ' with exit code 0' : ', not all with exit code 0'}` +
    (failedSidecars.length > 0 ? `, sidecar${plural(failedSidecars)} ${quoteList(failedSidecars)} exited non-zero` : '') +
    ` and every other sidecar has stopped; the exit code of ignore-exit-code sidecar${plural(names)} ` +
    `${quoteList(names)} does not count. Kubelet stops the remaining containers.`;
  return phasePatch(facts.pod, {
    cause: 'ignoreExitCode',
    // Only the ignore-exit-code sidecars' codes are ignored: under Never, another sidecar's failure
    // fails the Pod as kubelet would have. (OnFailure restarts such a sidecar: see restartLoop.)
    wanted: failedSidecars.length > 0 ? 'Failed' : 'Succeeded',
    conditionMessage: text,
    event: (phase) => normal(EVENT_REASONS.phaseSet, `${EVENT_REASONS.phaseSet}/ignoreExitCode`, text(phase)),
    nowMs: facts.context.nowMs,
    events: facts.events,
  });
}

/** restartPolicy Never: sidecars whose exit code counts and that exited non-zero. */
function failedCountingSidecars(facts: Facts): string[] {
  if (facts.pod.restartPolicy !== 'Never') return [];
  return facts.classification.sidecars
    .filter((s) => !s.ignoreExitCode)
    .filter((s) => {
      const state = statusOf(facts.pod, s.name)?.state;
      return state?.kind === 'terminated' && state.exitCode !== 0;
    })
    .map((s) => s.name);
}

interface LoopingSidecar {
  name: string;
  request: string;
  exitCode?: number;
  before: number;
  now: number;
}

function describeLoop(l: LoopingSidecar): string {
  const code = l.exitCode !== undefined ? ` with exit code ${l.exitCode}` : '';
  return `"${l.name}" (stopped by ${l.request}${code}, restart count ${l.before} -> ${l.now})`;
}

/**
 * OnFailure: a sidecar we asked to stop that kubelet restarted (restart count above the one in the
 * request's statusContext, after a non-zero exit) would loop forever; end it with a phase patch.
 */
function restartLoop(facts: Facts, own: readonly OwnRequest[]): Decision | undefined {
  const { pod } = facts;
  if (pod.restartPolicy !== 'OnFailure') return undefined;
  const looping = facts.classification.sidecars.flatMap((s) => {
    const found = loopOf(pod, s.name, own);
    return found ? [found] : [];
  });
  if (looping.length === 0) return undefined;
  const names = looping.map((l) => l.name);
  const detail = looping.map(describeLoop).join(', ');
  const text = (phase: string): string =>
    `Phase set to ${phase} by sidecar-terminator to end a restart loop: kubelet restarted sidecar${plural(names)} ${detail} ` +
    'because it did not exit 0 on SIGTERM under restartPolicy OnFailure. Make the sidecar exit 0 on SIGTERM, ' +
    `or mark it ignore-exit-code (${ENV_IGNORE_EXIT_CODE}=true or annotation ${ANNOTATION_IGNORE_EXIT_CODE}).`;
  return phasePatch(pod, {
    cause: 'restartLoop',
    wanted: 'Succeeded',
    conditionMessage: text,
    event: (phase) => warning(EVENT_REASONS.restartLoop, `${EVENT_REASONS.restartLoop}/${names.join(',')}`, text(phase)),
    nowMs: facts.context.nowMs,
    events: facts.events,
  });
}

function loopOf(pod: PodProjection, name: string, own: readonly OwnRequest[]): LoopingSidecar | undefined {
  const status = statusOf(pod, name);
  if (!status || (status.state.kind === 'terminated' && status.state.exitCode === 0)) return undefined;
  const asked = latestAsk(name, own);
  const context = asked?.container.statusContext;
  if (!asked || !context || status.restartCount <= context.restartCount) return undefined;
  const exitCode = asked.container.state?.exitCode;
  // An exit 0 is never restarted under OnFailure: the restart had another cause.
  if (exitCode === 0) return undefined;
  return { name, request: asked.request.name, exitCode, before: context.restartCount, now: status.restartCount };
}

/** The latest of our requests that asked this container to stop. */
interface Ask {
  request: OwnRequest;
  container: ExistingRequestContainer;
}

function latestAsk(name: string, own: readonly OwnRequest[]): Ask | undefined {
  let found: Ask | undefined;
  for (const request of own) {
    const container = request.containers.find((c) => c.name === name);
    if (container && (!found || request.attempt > found.request.attempt)) found = { request, container };
  }
  return found;
}

/**
 * restartPolicy Never: a sidecar that exited non-zero fails the Pod although every main succeeded.
 * The phase is left alone (the sidecar's failure may be real); the operator is told how to fix it.
 */
function sidecarFailedPodWarnings(pod: PodProjection, classification: Classification): PodEvent[] {
  if (pod.restartPolicy !== 'Never' || pod.phase === 'Succeeded' || !allMainsSucceeded(pod)) return [];
  return classification.sidecars.flatMap((s) => {
    const state = statusOf(pod, s.name)?.state;
    if (state?.kind !== 'terminated' || state.exitCode === 0) return [];
    const fix = s.ignoreExitCode
      ? 'It is marked ignore-exit-code, but exited before the other sidecars had stopped, so the phase was ' +
        'not yet set. Make it exit 0 on SIGTERM.'
      : 'Fix either: make the sidecar exit 0 on SIGTERM, or mark it ignore-exit-code ' +
        `(${ENV_IGNORE_EXIT_CODE}=true together with ${ENV_TERMINATE_WHEN_JOB_EXIT}=true, or annotation ${ANNOTATION_IGNORE_EXIT_CODE}).`;
    return [
      warning(
        EVENT_REASONS.sidecarFailedPod,
        `${EVENT_REASONS.sidecarFailedPod}/${s.name}`,
        `Sidecar "${s.name}" exited with code ${state.exitCode} after every main container succeeded, so the Pod ` +
          `fails (restartPolicy Never) although its work succeeded. ${fix}`,
      ),
    ];
  });
}

// ---- helpers ----

function notHandled(reason: NotHandledReason, message: string, events: PodEvent[]): NotHandled {
  return { kind: 'notHandled', reason, message, events };
}

function wait(reason: WaitReason, message: string, events: PodEvent[], sidecars: readonly Sidecar[]): Wait {
  return { kind: 'wait', reason, message, events, containers: sidecars.map((s) => s.name) };
}

function plural(names: readonly string[]): string {
  return names.length === 1 ? '' : 's';
}
