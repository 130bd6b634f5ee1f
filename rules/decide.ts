// The pure decision for one Pod, computed from its full current state: whether it is handled, how
// its sidecars are stopped on real and virtual nodes, and when the controller sets its phase.
import { MAX_REQUEST_CONTAINERS } from '../api/container-recreate-request.ts';
import type { Classification, NodeKind, Sidecar } from './classify.ts';
import { classify, isStoppableOn, notStoppableWarning, policyNote } from './classify.ts';
import {
  ANNOTATION_IGNORE_EXIT_CODE,
  ANNOTATION_SIDECARS,
  ENV_IGNORE_EXIT_CODE,
  ENV_TERMINATE_WHEN_JOB_EXIT,
  ENV_TERMINATE_WITH_IMAGE,
  EVENT_REASONS,
  REQUEST_NAME_PREFIX,
} from '../api/names.ts';
import type { CreateRequest, Decision, ImageSwap, NotHandled, NotHandledReason, Wait, WaitReason } from './decision.ts';
import { boundedDelayMs } from './decision.ts';
import type { DecisionEvent } from './events.ts';
import { clip, joinSample, normal, quoteList, warning } from './events.ts';
import { containerOf, mainsDone, restartAfterExit, statusesComplete } from './main-done.ts';
import { imageAllowed } from './image-reference.ts';
import { allMainsSucceeded, phasePatch, settledPhasePatch } from './phase.ts';
import type { ContainerStatusProjection, PodProjection } from './projection.ts';
import { unmarkedHolders, unmarkedHoldersWarning } from './unmarked-sidecars.ts';
import type { ExistingRequest, ExistingRequestContainer, SidecarTerminatorOptions } from './requests.ts';
import {
  attemptsSpanMs,
  buildTerminationRequest,
  DEFAULT_OPTIONS,
  isOwnRequest,
  MAX_REQUEST_ATTEMPTS,
  MAX_REQUEST_NAME_NUMBER,
  requestAttempt,
  requestName,
  retryDelaySeconds,
} from './requests.ts';

export interface DecideContext {
  /** Requests that may be the Pod's (found by the Pod's uid in their label or name); only our own count. */
  requests: readonly ExistingRequest[];
  nowMs: number;
  options?: SidecarTerminatorOptions;
}

/** How long after a request completed kubelet's report of an exit the agent saw is waited for, before a retry. */
export const STATUS_REPORT_GRACE_MS = 30_000;
/** Look again this often meanwhile (kubelet's report itself re-triggers sooner). */
const STATUS_REPORT_POLL_MS = 5_000;
/** Waiting reasons of a container being created as asked: no cause for a Warning on its own. */
const TRANSIT_REASONS: ReadonlySet<string> = new Set(['ContainerCreating', 'PodInitializing']);

/** One of our requests, with its attempt number parsed from its name. */
type OwnRequest = ExistingRequest & { attempt: number };

/** The Pod's requests as the rules read them. */
interface History {
  /** Ours: a name of ours, and this Pod's uid and node in the labels. */
  own: OwnRequest[];
  /** The first name after our latest request that no request holds: names others took are skipped. */
  nextAttempt: number;
  /**
   * How many requests of ours there have been: our latest's number less the names below it that
   * others hold (ours deleted after their TTL still count). The retry backoff grows with it.
   */
  ownAttempts: number;
}

interface Facts {
  pod: PodProjection;
  classification: Classification;
  /** Sidecars whose current state is not terminated. */
  running: Sidecar[];
  context: DecideContext;
  options: SidecarTerminatorOptions;
  /** Events every decision from here on carries. */
  events: DecisionEvent[];
}

export function decide(pod: PodProjection, node: NodeKind, context: DecideContext): Decision {
  if (pod.deleting) return notHandled('deleting', 'Pod is being deleted', []);
  if (pod.restartPolicy !== 'Never' && pod.restartPolicy !== 'OnFailure') {
    return notHandled('restartPolicyAlways', `restartPolicy ${pod.restartPolicy}: kubelet restarts containers`, []);
  }
  const classification = classify(pod);
  const events = [...classification.warnings];
  if (classification.mains.length === 0 && classification.sidecars.length > 0) return noMain(pod, events);
  // Kubelet reports Pending while any container has never started, even after the mains are done
  // (a sidecar's image cannot be pulled): such a Pod is handled, or its Job would hang. A sidecar
  // that is merely created (it has a container ID) is about to start: wait for it as before.
  const stuckPending = statusesComplete(pod) && mainsDone(pod, classification.mains) && classification.sidecars.some((s) => notStarted(pod, s, 'real'));
  if (pod.phase === 'Pending' && !stuckPending) return notHandled('pending', 'Pod is Pending', events);
  const holders = unmarkedHolders(pod, classification.mains);
  if (holders.length > 0) {
    const decision = notHandled('heldByUnmarkedSidecar', 'well-known sidecars nobody marked hold the Pod open', [...events, unmarkedHoldersWarning(holders)]);
    return { ...decision, holders };
  }
  if (classification.sidecars.length === 0) return notHandled('noSidecar', 'no sidecar container', events);
  const running = classification.sidecars.filter((s) => !isTerminated(pod, s.name));
  // Our own requests, read on real nodes only (images are swapped elsewhere).
  const history = requestHistory(pod, node === 'real' ? context.requests : []);
  if (running.length === 0) {
    // Every exit is in: one that fails the Pod is reported, ours too (the phase was due before it).
    const failed = sidecarFailedPodWarnings(pod, classification, node, []);
    const closing = [...events, ...failed];
    const ended = node === 'real' ? settledOnRealNode(pod, context, closing) : ignoredExitsEnd(pod, classification, context, closing);
    if (ended) return ended;
    return notHandled('noRunningSidecar', 'every sidecar has terminated', closing);
  }
  if (!statusesComplete(pod)) return notHandled('statusesIncomplete', 'a container has no status yet', events);
  if (!mainsDone(pod, classification.mains)) return notHandled('mainsNotDone', 'main containers not done', events);
  events.push(...sidecarFailedPodWarnings(pod, classification, node, history.own));
  if (pod.phase === 'Succeeded' || pod.phase === 'Failed') {
    // Exit codes no longer matter and kubelet never leaves a terminal phase: it stops the rest itself.
    return wait('podTerminal', `phase ${pod.phase}: kubelet stops the remaining containers`, events, running);
  }
  const facts = { pod, classification, running, context, options: context.options ?? DEFAULT_OPTIONS, events };
  return node === 'real' ? decideOnRealNode(facts, history) : decideBySwapping(facts, node);
}

/** R56, unless --settled-phase=false. */
function settledOnRealNode(pod: PodProjection, context: DecideContext, events: DecisionEvent[]): Decision | undefined {
  return (context.options ?? DEFAULT_OPTIONS).settledPhase ? settledPhasePatch(pod, context.nowMs, events) : undefined;
}

// ---- when a Pod is handled ----

function statusOf(pod: PodProjection, name: string): ContainerStatusProjection | undefined {
  return pod.statuses.find((s) => s.name === name);
}

function isTerminated(pod: PodProjection, name: string): boolean {
  return statusOf(pod, name)?.state.kind === 'terminated';
}

/**
 * A sidecar that has not started and that nothing we do can reach: waiting, and on a real node
 * without a container a request could address. Image swaps never address containers, so on virtual
 * and agentless nodes any waiting sidecar counts (once its image is swapped, or when it cannot be).
 */
function notStarted(pod: PodProjection, sidecar: Sidecar, node: NodeKind): boolean {
  const status = statusOf(pod, sidecar.name);
  if (status?.state.kind !== 'waiting') return false;
  return node !== 'real' || !status.containerID;
}

// ---- real nodes ----

function decideOnRealNode(facts: Facts, history: History): Decision {
  const { pod, running, events } = facts;
  const loop = restartLoop(facts, history.own);
  if (loop) return loop;

  const unstarted = running.filter((s) => notStarted(pod, s, 'real'));
  const started = running.filter((s) => !unstarted.includes(s));
  // An ignore-exit-code sidecar that never started holds nothing up: it neither fails nor succeeds the Pod.
  const blocking = unstarted.filter((s) => !s.ignoreExitCode);
  events.push(...notStartedWarning(facts, blocking));
  const others = started.filter((s) => !s.ignoreExitCode);
  const restarting = selfRestarting(facts, others);
  const unstoppable = others.filter((s) => !isStoppableOn(s, 'real'));
  if (unstoppable.length > 0) events.push(notStoppableWarning(pod, unstoppable, 'real'));
  // While a sidecar whose exit code counts cannot be stopped the Pod cannot end: no phase, so no
  // ignore-exit-code sidecar is asked either (its exit could then fail the Pod, or be restarted).
  const held = unstoppable.length + restarting.length > 0;
  const stoppable = started.filter((s) => (s.ignoreExitCode ? !held : isStoppableOn(s, 'real') && !restarting.includes(s)));
  if (stoppable.length === 0) {
    if (held) return notHandled('noStoppableSidecar', 'no running sidecar can be stopped on a real node', events);
    if (blocking.length > 0) return afterStartTimeout(facts, blocking);
    return ignoreExitCodePatch(facts, running.filter((s) => s.ignoreExitCode));
  }
  return requestStops(facts, history, stoppable, blocking);
}

/**
 * The order of stops on a real node (R53, R23): by tier, and within a tier the sidecars whose exit
 * code counts before the ignore-exit-code ones (whose exit may need the phase written first).
 */
export function stopStep(sidecar: Sidecar): number {
  return sidecar.tier * 2 + (sidecar.ignoreExitCode ? 1 : 0);
}

/**
 * Whether the phase must be set once this step's ignore-exit-code sidecars are asked to stop, before
 * they exit: kubelet would see their exit code otherwise. It is the last step (under Never, the last
 * exit decides the phase), or kubelet would start one of them again after a failed exit (the Pod's
 * OnFailure, or its own policy, R57): then later steps are not waited for.
 */
function phaseBound(facts: Facts, due: readonly Sidecar[], laterSteps: boolean): boolean {
  const { pod } = facts;
  if (!laterSteps) {
    // The last step: its exits are the Pod's last. An ignore-exit-code sidecar among them, or an
    // earlier one not reported exited 0 (its exit may be known to the agent's record only), could
    // make kubelet's phase Failed.
    return due.some((s) => s.ignoreExitCode) || facts.classification.sidecars.some((s) => s.ignoreExitCode && !exitedZero(pod, s.name));
  }
  if (!due.every((s) => s.ignoreExitCode)) return false;
  return due.some((s) => [SIGTERM_EXIT, SIGKILL_EXIT].some((code) => restartAfterExit(containerOf(pod, s.name), pod.restartPolicy, code) !== 'none'));
}

function exitedZero(pod: PodProjection, name: string): boolean {
  const state = statusOf(pod, name)?.state;
  return state?.kind === 'terminated' && state.exitCode === 0;
}

/** The exit codes of a stop: the stop signal, or the kill at the end of the grace period. */
const SIGTERM_EXIT = 143;
const SIGKILL_EXIT = 137;

/** One of our requests asked this very container (the one the status reports) to stop. */
function askedToStop(pod: PodProjection, sidecar: Sidecar, own: readonly OwnRequest[]): boolean {
  const containerID = statusOf(pod, sidecar.name)?.containerID;
  return containerID !== undefined && own.some((r) => r.containers.some((c) => c.name === sidecar.name && c.statusContext?.containerID === containerID));
}

/**
 * A request for the stoppable sidecars that have a container ID, unless one is under way; or the
 * phase, once the ignore-exit-code sidecars whose exit it must come before are asked (phaseBound).
 */
function requestStops(facts: Facts, history: History, stoppable: readonly Sidecar[], blocking: readonly Sidecar[]): Decision {
  const { pod, events } = facts;
  const withId = stoppable.filter((s) => statusOf(pod, s.name)?.containerID);
  const reported = exitsAwaitingReport(facts, withId, history.own);
  const unexited = withId.filter((s) => !reported.names.has(s.name));
  // Stop steps (R53, R23): only the lowest of the started sidecars not seen to exit. One that never
  // started holds no later step: it ran nothing that needs the later ones, and would hold them forever.
  const pending = [...unexited, ...stoppable.filter((s) => !withId.includes(s))];
  const step = Math.min(...pending.map(stopStep));
  const toStop = unexited.filter((s) => stopStep(s) === step);
  const later = unexited.filter((s) => stopStep(s) > step).map((s) => s.name);
  const bound = toStop.length > 0 && phaseBound(facts, toStop, pending.some((s) => stopStep(s) > step));
  if (bound && blocking.length > 0) {
    // The phase ends the wait for sidecars that have not started (R19): wait for them first.
    const waiting = startWait(facts, blocking);
    if (waiting) return waiting;
  }
  if (bound && toStop.every((s) => askedToStop(pod, s, history.own))) {
    if (blocking.length > 0) return notStartedPatch(facts, blocking);
    return ignoreExitCodePatch(facts, facts.classification.sidecars.filter((s) => s.ignoreExitCode));
  }
  const active = history.own.find((r) => !r.completed);
  if (active) {
    return { ...wait('requestActive', `request ${active.name} is in progress`, events, stoppable), requestName: active.name };
  }
  const waitingFor = [...stoppable.filter((s) => !statusOf(pod, s.name)?.containerID), ...blocking.filter((s) => s.viaRequest)].map((s) => s.name);
  if (withId.length === 0) return wait('containerIds', 'sidecars have no container ID yet', events, stoppable);
  if (unexited.length === 0) {
    const names = [...reported.names];
    const message = `the agent saw ${names.join(',')} exit; waiting for kubelet to report it`;
    return { ...wait('statusReportPending', message, events, withId), requeueAfterMs: reported.waitMs };
  }
  if (toStop.length === 0) return wait('containerIds', `sidecars of stop tier ${Math.floor(step / 2)} have no container ID yet`, events, stoppable);
  // Only requests of ours that exist count: a gap below our latest may be a name someone took and gave back.
  if (history.own.length >= MAX_REQUEST_ATTEMPTS && attemptsCouldBeOurs(facts)) return attemptsExhausted(facts, toStop);
  if (history.nextAttempt > MAX_REQUEST_NAME_NUMBER) return namesTaken(facts, toStop);
  // A request holds MAX_REQUEST_CONTAINERS at most: the rest go in the next one, once this one is done.
  const batch = toStop.slice(0, MAX_REQUEST_CONTAINERS).map((s) => s.name);
  return createRequest(facts, history, batch, waitingFor, toStop.length - batch.length, later, bound);
}

/**
 * The Pod's own requests, and the next attempt's number: after our latest, skipping every name a
 * request holds (ours or not). Names others took are skipped, never counted: anyone who may create
 * requests can take our names, and must not be able to push us to the end of them. A request that
 * looks like ours in every label may still be someone's, named at the top of the range: past the
 * last name, the numbering starts again at the lowest free one.
 */
function requestHistory(pod: PodProjection, requests: readonly ExistingRequest[]): History {
  const taken = new Set<number>();
  const own: OwnRequest[] = [];
  for (const r of requests) {
    const attempt = requestAttempt(pod.uid, r.name);
    if (attempt === undefined) continue;
    taken.add(attempt);
    if (isOwnRequest(r, pod)) own.push({ ...r, attempt });
  }
  const latest = latestOf(own)?.attempt ?? 0;
  const nextAttempt = firstFreeNumber(latest, taken) ?? firstFreeNumber(0, taken) ?? MAX_REQUEST_NAME_NUMBER + 1;
  const ownNumbers = new Set(own.map((r) => r.attempt));
  const othersBelow = [...taken].filter((n) => n < latest && !ownNumbers.has(n)).length;
  return { own, nextAttempt, ownAttempts: latest - othersBelow };
}

/** The first number after `after`, up to `max`, that no name in `taken` holds. */
export function firstFreeNumber(after: number, taken: ReadonlySet<number>, max = MAX_REQUEST_NAME_NUMBER): number | undefined {
  for (let n = after + 1; n <= max; n++) if (!taken.has(n)) return n;
  return undefined;
}

/**
 * The latest request: by creation, then by number. Not by number alone, as numbering starts again
 * once a name at the top of the range is taken.
 */
function isNewer(a: OwnRequest, than: OwnRequest): boolean {
  const at = (r: OwnRequest) => r.creationTimeMs ?? Number.MAX_SAFE_INTEGER;
  return at(a) !== at(than) ? at(a) > at(than) : a.attempt > than.attempt;
}

function latestOf(requests: readonly OwnRequest[]): OwnRequest | undefined {
  return requests.reduce<OwnRequest | undefined>((a, r) => (a && !isNewer(r, a) ? a : r), undefined);
}

function createRequest(facts: Facts, history: History, containers: string[], waitingForId: string[], left: number, later: string[], phaseNext: boolean): CreateRequest {
  const { pod, options, events } = facts;
  const attempt = history.nextAttempt;
  const request = buildTerminationRequest(pod, containers, attempt, options, phaseNext);
  const name = requestName(pod.uid, attempt);
  const completed = history.own.filter((r) => r.completed);
  const askedBefore = new Set(completed.flatMap((r) => r.containers.map((c) => c.name)));
  const retried = containers.filter((c) => askedBefore.has(c));
  const retriedSet = new Set(retried);
  // The request that last asked for one of them: the one that did not do its job.
  const previous = latestOf(completed.filter((r) => r.containers.some((c) => retriedSet.has(c.name))));
  // A sidecar never asked to stop goes at once; only a pure retry waits for the backoff, counted in
  // our own requests so that names taken by others do not lengthen it.
  const ownAttempt = history.ownAttempts + 1;
  const delaySeconds = previous && retried.length === containers.length ? retryDelaySeconds(ownAttempt, options) : 0;
  const delayMs = previous && delaySeconds > 0 ? boundedDelayMs(remainingMs(previous, delaySeconds, facts.context.nowMs)) : 0;
  const stopping = normal(
    EVENT_REASONS.stopping,
    `${EVENT_REASONS.stopping}/${name}`,
    `Main containers are done; stopping sidecar${plural(containers)} ${quoteList(containers)} with ContainerRecreateRequest ${name}.` +
      (left > 0 ? ` ${left} more follow in the next request once this one is done (a request holds at most ${MAX_REQUEST_CONTAINERS}).` : '') +
      (later.length > 0 ? ` ${quoteList(later)} ${later.length === 1 ? 'is' : 'are'} stopped once ${containers.length === 1 ? 'it has' : 'they have'} exited (later in the stop order: a later tier, or ignore-exit-code after the others of its tier).` : '') +
      (waitingForId.length > 0
        ? ` Waiting for ${quoteList(waitingForId)} to start before stopping ${waitingForId.length === 1 ? 'it' : 'them'} too.`
        : '') +
      (phaseNext ? ' The Pod\'s phase is set as soon as this request exists, from the main containers and the sidecars already stopped: the exit code of an ignore-exit-code sidecar must not count.' : '') +
      policyNote(facts.classification.sidecars.filter((s) => containers.includes(s.name))),
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
    phaseFollows: phaseNext,
    events: [...events, ...retryEvents, stopping],
    message: `create ${name} for ${quoteList(containers)}${delayMs > 0 ? ` in ${delayMs} ms` : ''}`,
  };
}

/** Backoff counted from the previous request's completion; no known time means no wait. */
function remainingMs(previous: ExistingRequest, delaySeconds: number, nowMs: number): number {
  const since = previous.completionTimeMs ?? previous.creationTimeMs;
  if (since === undefined) return 0;
  return Math.max(0, since + delaySeconds * 1000 - nowMs);
}

function retryWarning(previous: ExistingRequest, retried: string[], name: string, attempt: number, delaySeconds: number): DecisionEvent {
  const why = requestOutcome(previous, retried);
  return warning(
    EVENT_REASONS.retrying,
    `${EVENT_REASONS.retrying}/${name}`,
    `ContainerRecreateRequest ${previous.name} completed but sidecar${plural(retried)} ${quoteList(retried)} ` +
      `${retried.length === 1 ? 'is' : 'are'} still running${why}; retrying with ${name} (attempt ${attempt}` +
      `${delaySeconds > 0 ? `, after a ${delaySeconds}s backoff` : ''}).`,
  );
}

/** What the previous request said about itself and the retried containers (a few of them). */
function requestOutcome(request: ExistingRequest, names: readonly string[]): string {
  const wanted = new Set(names);
  const details = request.containers
    .filter((c) => wanted.has(c.name) && c.state?.message)
    .map((c) => `${clip(c.name)}: ${clip(c.state?.message ?? '', 200)}`);
  const parts = [...(request.message ? [clip(request.message, 200)] : []), ...(details.length > 0 ? [joinSample(details)] : [])];
  return parts.length > 0 ? ` (${parts.join('; ')})` : '';
}

/**
 * Sidecars the agent saw exit whose exit kubelet has not reported yet: the latest completed request
 * asking for each recorded it Succeeded with an exit code, for the very container the status still
 * shows. A retry now would stop nothing and warn for nothing, so kubelet's report is waited for,
 * for STATUS_REPORT_GRACE_MS after that request completed at most.
 */
function exitsAwaitingReport(facts: Facts, sidecars: readonly Sidecar[], own: readonly OwnRequest[]): { names: Set<string>; waitMs: number } {
  const completed = own.filter((r) => r.completed);
  const names = new Set<string>();
  let waitMs = STATUS_REPORT_POLL_MS;
  for (const sidecar of sidecars) {
    const asked = latestAsk(sidecar.name, completed);
    const recorded = asked?.container.state;
    if (!asked || recorded?.phase !== 'Succeeded' || recorded.exitCode === undefined) continue;
    const status = statusOf(facts.pod, sidecar.name);
    if (!status?.containerID || asked.container.statusContext?.containerID !== status.containerID) continue;
    const completedAt = asked.request.completionTimeMs;
    if (completedAt === undefined) continue;
    const left = completedAt + STATUS_REPORT_GRACE_MS - facts.context.nowMs;
    if (left <= 0) continue;
    names.add(sidecar.name);
    waitMs = Math.min(waitMs, left);
  }
  return { names, waitMs: boundedDelayMs(waitMs) };
}

/**
 * Whether MAX_REQUEST_ATTEMPTS requests in our names and labels can all be ours: ours wait out their
 * backoff, so they take attemptsSpanMs at least from the mains' finish, which kubelet reports. Anyone
 * who may create requests can make that many at once with our labels; before that time they end
 * nothing, and only lengthen our backoff, which retryMaxDelaySeconds bounds.
 */
function attemptsCouldBeOurs(facts: Facts): boolean {
  const finishedAtMs = mainsFinishedAtMs(facts.pod, facts.classification.mains);
  return finishedAtMs === undefined || facts.context.nowMs - finishedAtMs >= attemptsSpanMs(facts.options);
}

/** MAX_REQUEST_ATTEMPTS requests of ours did not stop the sidecars: say so once, rather than retry forever. */
function attemptsExhausted(facts: Facts, sidecars: readonly Sidecar[]): NotHandled {
  const names = sidecars.map((s) => s.name);
  const event = warning(
    EVENT_REASONS.notStoppable,
    `${EVENT_REASONS.notStoppable}/attempts`,
    `${MAX_REQUEST_ATTEMPTS} ContainerRecreateRequests did not stop sidecar${plural(names)} ${quoteList(names)}, ` +
      `which ${names.length === 1 ? 'keeps' : 'keep'} running; no further request is made for this Pod.`,
  );
  return notHandled('attemptsExhausted', `${MAX_REQUEST_ATTEMPTS} requests of ours did not stop the sidecars`, [...facts.events, event]);
}

/** How often a Pod whose every request name is held by others is looked at again. */
const NAMES_TAKEN_RECHECK_MS = 300_000;

/**
 * Every name of ours up to MAX_REQUEST_NAME_NUMBER is held by requests that are not ours: wait and
 * look again (never give the Pod up for it), and say what to delete.
 */
function namesTaken(facts: Facts, sidecars: readonly Sidecar[]): Wait {
  const names = sidecars.map((s) => s.name);
  const last = requestName(facts.pod.uid, MAX_REQUEST_NAME_NUMBER);
  const event = warning(
    EVENT_REASONS.notStoppable,
    `${EVENT_REASONS.notStoppable}/names`,
    `No ContainerRecreateRequest can be created for this Pod now: every name up to ${last} is taken by requests ` +
      `sidecar-terminator did not create. Sidecar${plural(names)} ${quoteList(names)} ${names.length === 1 ? 'keeps' : 'keep'} running ` +
      `until they are deleted (${REQUEST_NAME_PREFIX}${facts.pod.uid}-<n>).`,
  );
  return { ...wait('namesTaken', `every request name up to ${last} is taken`, [...facts.events, event], sidecars), requeueAfterMs: NAMES_TAKEN_RECHECK_MS };
}

// ---- virtual nodes, and real nodes without an agent (R22) ----

function decideBySwapping(facts: Facts, node: Exclude<NodeKind, 'real'>): Decision {
  const { pod, running, events } = facts;
  const unstarted = running.filter((s) => notStarted(pod, s, node));
  const active = running.filter((s) => !unstarted.includes(s));
  // On a real node without an agent, only images the operator allows are swapped in (R22).
  const refused = node === 'agentless' ? running.filter((s) => s.swapImage !== undefined && !imageAllowed(s.swapImage, facts.options.agentlessSwapImages)) : [];
  // A swapped-in image exits at once: kubelet would start it again and again.
  const restarting = selfRestarting(facts, running);
  const swappable = (s: Sidecar) => isStoppableOn(s, node) && !refused.includes(s) && !restarting.includes(s);
  const unstoppable = active.filter((s) => !isStoppableOn(s, node));
  if (unstoppable.length > 0) events.push(notStoppableWarning(pod, unstoppable, node));
  if (refused.length > 0) events.push(swapRefusedWarning(pod, refused, facts.options.agentlessSwapImages));
  const swaps = running.flatMap((s): ImageSwap[] => {
    const from = pod.containers.find((c) => c.name === s.name)?.image ?? '';
    // Already swapped: the spec carries the target image, kubelet is replacing the container.
    return !swappable(s) || from === s.swapImage ? [] : [{ container: s.name, from, to: s.swapImage! }];
  });
  if (swaps.length > 0) return swapImages(facts, swaps, node);

  // Every image is swapped. A waiting sidecar is one that crash-loops on the quick-exit image
  // (OnFailure after a non-zero exit), or never started.
  const blocking = unstarted.filter((s) => !s.ignoreExitCode);
  events.push(...notStartedWarning(facts, blocking.filter((s) => !inTransit(pod, s))));
  // A swapped ignore-exit-code sidecar holds nothing up: its exit code does not count, and the swap
  // ends it. The phase is set at once, before its quick-exit container can fail to start (R21).
  const holding = active.filter((s) => !(s.ignoreExitCode && swappable(s)));
  if (holding.length > 0) {
    if (!holding.some(swappable)) {
      return notHandled('noStoppableSidecar', `no running sidecar can be stopped on a ${SWAP_NODES[node]}`, events);
    }
    return wait('imageSwapInProgress', 'images already swapped', events, holding.filter(swappable));
  }
  if (blocking.length > 0) return afterStartTimeout(facts, blocking);
  // Only ignore-exit-code sidecars are left: end the Pod as on a real node.
  return ignoreExitCodePatch(facts, running);
}

/** The key of the Warning for refused swaps, before the sidecars and images it names. */
const SWAP_REFUSED_KEY = `${EVENT_REASONS.notStoppable}/image`;

/** Whether an event is swapRefusedWarning's: the controller counts and logs each one it sends (R22). */
export function isSwapRefusal(event: DecisionEvent): boolean {
  return event.key.startsWith(`${SWAP_REFUSED_KEY}/`);
}

/** The one Warning per Pod for sidecars whose ..._WITH_IMAGE the operator does not allow where no agent runs. */
function swapRefusedWarning(pod: PodProjection, sidecars: readonly Sidecar[], allowed: readonly string[]): DecisionEvent {
  const several = sidecars.length > 1;
  const images = joinSample(sidecars.map((s) => `"${s.name}" names ${clip(s.swapImage ?? '', 200)}`));
  return warning(
    EVENT_REASONS.notStoppable,
    boundedKey(SWAP_REFUSED_KEY, sidecars.map((s) => `${s.name}=${s.swapImage}`)),
    `Node "${pod.nodeName ?? ''}" has no sidecar-terminator agent, and ${ENV_TERMINATE_WITH_IMAGE} of sidecar${several ? 's' : ''} ` +
      `${images}: not an image the operator allows to be swapped in there (--agentless-swap-images: ` +
      `${allowed.length > 0 ? clip(allowed.join(','), 300) : 'none'}), as no admission saw it when the Pod was created. ` +
      `Nothing will stop ${several ? 'them' : 'it'} and the Pod keeps running. Use an allowed image, or ask the operator to allow this one.`,
  );
}

/**
 * Every sidecar has terminated on a node without kubelet's phase rules for them (virtual, or swapped
 * for want of an agent) and one is ignore-exit-code: its exit (128 when the quick-exit image lacks
 * its command) must not leave the Pod Running, nor fail it. The phase is set as R23 sets it.
 */
function ignoredExitsEnd(pod: PodProjection, classification: Classification, context: DecideContext, events: DecisionEvent[]): Decision | undefined {
  if (pod.phase === 'Succeeded' || pod.phase === 'Failed') return undefined;
  if (!statusesComplete(pod) || !mainsDone(pod, classification.mains)) return undefined;
  const ignoring = classification.sidecars.filter((s) => s.ignoreExitCode);
  if (ignoring.length === 0) return undefined;
  const facts = { pod, classification, running: [], context, options: context.options ?? DEFAULT_OPTIONS, events };
  return ignoreExitCodePatch(facts, ignoring);
}

const SWAP_NODES: Record<Exclude<NodeKind, 'real'>, string> = { virtual: 'virtual node', agentless: 'node without an agent' };

function swapImages(facts: Facts, swaps: ImageSwap[], node: Exclude<NodeKind, 'real'>): Decision {
  const names = swaps.map((s) => s.container);
  const event = normal(
    EVENT_REASONS.replacingImage,
    boundedKey(EVENT_REASONS.replacingImage, swaps.map((s) => `${s.container}=${s.to}`)),
    `Main containers are done; stopping sidecar${plural(names)} by replacing ` +
      joinSample(swaps.map((s) => `the image of "${s.container}" with ${clip(s.to, 200)}`)) +
      ` (${SWAP_NODES[node]}: the new container exits at once).` +
      policyNote(facts.classification.sidecars.filter((s) => names.includes(s.name))),
  );
  return { kind: 'swapImages', swaps, events: [...facts.events, event], message: `swap images of ${quoteList(names)}` };
}

/** Waiting for the container our own image swap asked for: the usual path, no cause for a Warning. */
function inTransit(pod: PodProjection, sidecar: Sidecar): boolean {
  const state = statusOf(pod, sidecar.name)?.state;
  return sidecar.swapImage !== undefined && state?.kind === 'waiting' && (state.reason === undefined || TRANSIT_REASONS.has(state.reason));
}

// ---- sidecars with a restart policy of their own ----

/**
 * Kubelet starts this sidecar again whatever its exit, exit 0 too: its own restartPolicy Always, or a
 * restart rule matching 0. A stop cannot end it, and the Pod cannot end while it is there.
 */
function restartsAfterAnyExit(pod: PodProjection, sidecar: Sidecar): boolean {
  return restartAfterExit(containerOf(pod, sidecar.name), pod.restartPolicy, 0) !== 'none';
}

/**
 * The sidecars whose exit code counts that kubelet restarts after any exit: never stopped (a stop
 * loop against kubelet ends nothing), with one Warning naming the cause and the fix. An
 * ignore-exit-code one is not among them: the phase written for it ends it (R23).
 */
function selfRestarting(facts: Facts, sidecars: readonly Sidecar[]): Sidecar[] {
  const found = sidecars.filter((s) => !s.ignoreExitCode && restartsAfterAnyExit(facts.pod, s));
  if (found.length === 0) return found;
  const names = found.map((s) => s.name);
  const several = found.length > 1;
  const them = several ? 'them' : 'it';
  facts.events.push(warning(
    EVENT_REASONS.sidecarRestartsItself,
    boundedKey(EVENT_REASONS.sidecarRestartsItself, names),
    `Sidecar${plural(names)} ${quoteList(names)} ${several ? 'have' : 'has'} a restartPolicy of ${several ? 'their' : 'its'} own ` +
      `(Always, or a restart rule matching exit code 0): kubelet starts ${them} again after any exit, so stopping ${them} ` +
      `cannot end the Pod, and sidecar-terminator does not try; the Pod keeps running. For a sidecar that must restart while ` +
      `the Pod runs, make ${them} a native sidecar (an init container with restartPolicy: Always, Kubernetes 1.29+), which ` +
      `kubelet stops once the main containers are done; otherwise remove the container's restartPolicy.`,
  ));
  return found;
}

// ---- sidecars that never started ----

/** `"a" (ErrImagePull)`, for a few of them. */
function describeWaiting(pod: PodProjection, sidecars: readonly Sidecar[]): string {
  return joinSample(
    sidecars.map((s) => {
      const state = statusOf(pod, s.name)?.state;
      const reason = state?.kind === 'waiting' && state.reason ? state.reason : 'waiting';
      return `"${clip(s.name)}" (${clip(reason)})`;
    }),
  );
}

/** The one Warning per Pod about sidecars that have not started while the mains are done. */
function notStartedWarning(facts: Facts, sidecars: readonly Sidecar[]): DecisionEvent[] {
  if (sidecars.length === 0) return [];
  const several = sidecars.length > 1;
  const them = several ? 'them' : 'it';
  return [
    warning(
      EVENT_REASONS.sidecarNotStarted,
      EVENT_REASONS.sidecarNotStarted,
      `Sidecar${several ? 's' : ''} ${describeWaiting(facts.pod, sidecars)} ${several ? 'have' : 'has'} not started, and the ` +
        `main containers are done. Started sidecars are stopped as usual; ${several ? 'these are' : 'this one is'} waited for ` +
        `up to ${facts.options.sidecarStartTimeoutSeconds}s from when the main containers finished. Then, once no started ` +
        `sidecar is left running, sidecar-terminator sets the Pod's phase without ${them} (Succeeded only if every main ` +
        'container exited 0 and no other sidecar failed, else Failed) and kubelet stops the remaining containers.',
    ),
  ];
}

/**
 * Only sidecars that never started hold the Pod up: wait for them sidecarStartTimeoutSeconds from
 * when the mains finished, then end the Pod without them.
 */
function afterStartTimeout(facts: Facts, unstarted: readonly Sidecar[]): Decision {
  return startWait(facts, unstarted) ?? notStartedPatch(facts, unstarted);
}

/** The wait for sidecars that have not started, while sidecarStartTimeoutSeconds have not passed; undefined once they have. */
function startWait(facts: Facts, unstarted: readonly Sidecar[]): Wait | undefined {
  const since = mainsFinishedAtMs(facts.pod, facts.classification.mains);
  const seconds = facts.options.sidecarStartTimeoutSeconds;
  if (since === undefined) {
    // Not even the Pod's start is known (an API server always sets its creation time).
    return wait('sidecarNotStarted', `no time known to count ${seconds}s from; waiting for the sidecars to start`, facts.events, unstarted);
  }
  const left = since + seconds * 1000 - facts.context.nowMs;
  if (left <= 0) return undefined;
  const message = `waiting ${Math.ceil(left / 1000)}s more for ${quoteList(unstarted.map((s) => s.name))} to start`;
  return { ...wait('sidecarNotStarted', message, facts.events, unstarted), requeueAfterMs: boundedDelayMs(left) };
}

/**
 * When the mains finished: the latest main's finishedAt. Where one is unknown, the latest time known
 * to come no later than the finish stands in (the known finishes, the Pod's start): the wait counts
 * from a time the Pod itself shows, so every reconcile, on any replica, reaches the same answer.
 */
function mainsFinishedAtMs(pod: PodProjection, mains: readonly string[]): number | undefined {
  const known: number[] = [];
  for (const name of mains) {
    const state = statusOf(pod, name)?.state;
    if (state?.kind === 'terminated' && state.finishedAtMs !== undefined) known.push(state.finishedAtMs);
  }
  if (mains.length > 0 && known.length === mains.length) return Math.max(...known);
  if (pod.startTimeMs !== undefined) known.push(pod.startTimeMs);
  return known.length > 0 ? Math.max(...known) : undefined;
}

function notStartedPatch(facts: Facts, unstarted: readonly Sidecar[]): Decision {
  const names = unstarted.map((s) => s.name);
  // As for ignore-exit-code: a sidecar that never ran neither fails nor succeeds the Pod.
  return phaseFromMains(facts, 'sidecarNotStarted',
    `, and sidecar${plural(names)} ${describeWaiting(facts.pod, unstarted)} had not started ` +
    `${facts.options.sidecarStartTimeoutSeconds}s after they finished, with no other sidecar left to stop.`);
}

// ---- exit codes and the phase ----

function ignoreExitCodePatch(facts: Facts, ignoring: readonly Sidecar[]): Decision {
  const names = ignoring.map((s) => s.name);
  return phaseFromMains(facts, 'ignoreExitCode',
    ` and every other sidecar has stopped or been asked to stop in its turn; the exit code of ignore-exit-code sidecar${plural(names)} ` +
    `${quoteList(names)} does not count.`);
}

/** The Pod's phase from its main containers and the sidecars whose exit code counts, through the guard. */
function phaseFromMains(facts: Facts, cause: 'ignoreExitCode' | 'sidecarNotStarted', why: string): Decision {
  const failedSidecars = failedCountingSidecars(facts);
  const text = (phase: string): string =>
    `Phase set to ${phase} by sidecar-terminator: the main containers are done` +
    `${allMainsSucceeded(facts.pod) ? ' with exit code 0' : ', not all with exit code 0'}` +
    (failedSidecars.length > 0 ? `, sidecar${plural(failedSidecars)} ${quoteList(failedSidecars)} exited non-zero` : '') +
    `${why} Kubelet stops the remaining containers.`;
  return phasePatch(facts.pod, {
    cause,
    // Only these sidecars' codes are ignored: under Never, another sidecar's failure fails the Pod
    // as kubelet would have. (OnFailure restarts such a sidecar: see restartLoop.)
    wanted: failedSidecars.length > 0 ? 'Failed' : 'Succeeded',
    conditionMessage: text,
    event: (phase) => normal(EVENT_REASONS.phaseSet, `${EVENT_REASONS.phaseSet}/${cause}`, text(phase)),
    nowMs: facts.context.nowMs,
    events: facts.events,
  });
}

/** Sidecars whose exit code counts that exited non-zero for good: kubelet does not start them again (R25). */
function failedCountingSidecars(facts: Facts): string[] {
  return facts.classification.sidecars.filter((s) => !s.ignoreExitCode && failedForGood(facts.pod, s.name) !== undefined).map((s) => s.name);
}

/**
 * The exit code of a sidecar that exited non-zero and that kubelet will not start again (its own
 * restartPolicy and rules, else the Pod's: kubelet counts it in the phase then); undefined otherwise.
 */
function failedForGood(pod: PodProjection, name: string): number | undefined {
  const state = statusOf(pod, name)?.state;
  if (state?.kind !== 'terminated' || state.exitCode === 0) return undefined;
  return restartAfterExit(containerOf(pod, name), pod.restartPolicy, state.exitCode) === 'none' ? state.exitCode : undefined;
}

interface LoopingSidecar {
  name: string;
  request: string;
  exitCode?: number;
  before: number;
  now: number;
  /** What restarts it: `restartPolicy OnFailure` (the Pod's), or the container's own policy and rules. */
  policy: string;
  ownPolicy: boolean;
}

function describeLoop(l: LoopingSidecar): string {
  const code = l.exitCode !== undefined ? ` with exit code ${l.exitCode}` : '';
  return `"${l.name}" (stopped by ${l.request}${code}, restart count ${l.before} -> ${l.now})`;
}

/**
 * A sidecar we asked to stop that kubelet restarted (restart count above the one in the request's
 * statusContext, after an exit its restart policy restarts: the Pod's OnFailure, or the container's
 * own policy or rule) would loop forever; end it with a phase patch.
 */
function restartLoop(facts: Facts, own: readonly OwnRequest[]): Decision | undefined {
  const { pod } = facts;
  const looping = facts.classification.sidecars.flatMap((s) => {
    const found = loopOf(pod, s.name, own);
    return found ? [found] : [];
  });
  if (looping.length === 0) return undefined;
  const names = looping.map((l) => l.name);
  const detail = joinSample(looping.map(describeLoop));
  const text = (phase: string): string =>
    `Phase set to ${phase} by sidecar-terminator to end a restart loop: kubelet restarted sidecar${plural(names)} ${detail} ` +
    `because ${names.length === 1 ? 'its' : 'their'} exit on SIGTERM is one ${names.length === 1 ? 'its' : 'their'} restart policy restarts ` +
    `(${joinSample(looping.map((l) => `"${l.name}": ${l.policy}`))}). Make the sidecar exit 0 on SIGTERM, ` +
    `or mark it ignore-exit-code (${ENV_IGNORE_EXIT_CODE}=true or annotation ${ANNOTATION_IGNORE_EXIT_CODE})` +
    (looping.some((l) => l.ownPolicy) ? ', or remove the container\'s own restartPolicy and rules.' : '.');
  return phasePatch(pod, {
    cause: 'restartLoop',
    wanted: 'Succeeded',
    conditionMessage: text,
    event: (phase) => warning(EVENT_REASONS.restartLoop, boundedKey(EVENT_REASONS.restartLoop, names), text(phase)),
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
  const container = containerOf(pod, name);
  const ownPolicy = container?.restart;
  // Only the Pod's OnFailure, or the container's own policy or rules, restart a sidecar after its exit.
  if (pod.restartPolicy !== 'OnFailure' && !ownPolicy) return undefined;
  const exitCode = asked.container.state?.exitCode;
  // An exit its restart policy does not restart (exit 0 under OnFailure): the restart had another cause.
  if (exitCode !== undefined && restartAfterExit(container, pod.restartPolicy, exitCode) === 'none') return undefined;
  const policy = ownPolicy ? `its own restartPolicy ${ownPolicy.policy}${ownPolicy.rules.length > 0 ? ' and restart rules' : ''}` : 'the Pod\'s restartPolicy OnFailure';
  return { name, request: asked.request.name, exitCode, before: context.restartCount, now: status.restartCount, policy, ownPolicy: ownPolicy !== undefined };
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
    if (container && (!found || isNewer(request, found.request))) found = { request, container };
  }
  return found;
}

/**
 * Sidecars that exited non-zero, which kubelet does not start again (restartPolicy Never, the Pod's or
 * their own), fail the Pod although every main succeeded.
 * The phase is left alone (the failure may be real); one Warning tells the operator how to fix it.
 */
function sidecarFailedPodWarnings(pod: PodProjection, classification: Classification, node: NodeKind, own: readonly OwnRequest[]): DecisionEvent[] {
  if (pod.phase === 'Succeeded' || !allMainsSucceeded(pod)) return [];
  const failed = classification.sidecars.flatMap((s) => {
    // Where images are swapped, an ignore-exit-code sidecar's exit fails nothing: the phase is ours
    // (R21); nor, while others run, where we asked it to stop in its turn: the phase comes before the last exit (R23).
    if (s.ignoreExitCode && (node !== 'real' || askedToStop(pod, s, own))) return [];
    // An exit kubelet restarts fails nothing: the restart loop is R24's.
    const exitCode = failedForGood(pod, s.name);
    return exitCode !== undefined ? [{ sidecar: s, exitCode }] : [];
  });
  const [first] = failed;
  if (!first) return [];
  const what =
    failed.length === 1
      ? `Sidecar "${first.sidecar.name}" exited with code ${first.exitCode}`
      : `Sidecars ${joinSample(failed.map((f) => `"${f.sidecar.name}" (code ${f.exitCode})`))} exited non-zero`;
  const ignoring = failed.filter((f) => f.sidecar.ignoreExitCode).map((f) => f.sidecar.name);
  const counting = failed.filter((f) => !f.sidecar.ignoreExitCode);
  const fixes: string[] = [];
  if (counting.length > 0) {
    fixes.push(
      'Fix either: make the sidecar exit 0 on SIGTERM, or mark it ignore-exit-code ' +
        `(${ENV_IGNORE_EXIT_CODE}=true together with ${ENV_TERMINATE_WHEN_JOB_EXIT}=true, or annotation ${ANNOTATION_IGNORE_EXIT_CODE}).`,
    );
  }
  if (ignoring.length > 0) {
    const subject = failed.length === 1 ? 'It is' : `${quoteList(ignoring)} ${ignoring.length === 1 ? 'is' : 'are'}`;
    fixes.push(`${subject} marked ignore-exit-code, but exited before the other sidecars had stopped, so the phase was not yet set. Make it exit 0 on SIGTERM.`);
  }
  return [
    warning(
      EVENT_REASONS.sidecarFailedPod,
      EVENT_REASONS.sidecarFailedPod,
      `${what} after every main container succeeded, and kubelet does not start ${failed.length === 1 ? 'it' : 'them'} again (restartPolicy Never), ` +
        `so the Pod fails although its work succeeded. ${fixes.join(' ')}`,
    ),
  ];
}

/**
 * Every container is a sidecar: there is no work whose end could release them, and ending the Pod
 * would end its work. Not ours; one Warning says what to change.
 */
function noMain(pod: PodProjection, events: DecisionEvent[]): NotHandled {
  const names = pod.containers.map((c) => c.name);
  const event = warning(
    EVENT_REASONS.noMainContainer,
    EVENT_REASONS.noMainContainer,
    `Every container of this Pod (${quoteList(names)}) is marked as a sidecar, so none is a main container whose end ` +
      'would release the others: sidecar-terminator leaves the Pod alone. At least one container must be a main container ' +
      `(without ${ENV_TERMINATE_WHEN_JOB_EXIT}, ${ENV_TERMINATE_WITH_IMAGE} or a place in annotation ${ANNOTATION_SIDECARS}).`,
  );
  return notHandled('noMain', 'no main container: every container is a sidecar', [...events, event]);
}

// ---- helpers ----

function notHandled(reason: NotHandledReason, message: string, events: DecisionEvent[]): NotHandled {
  return { kind: 'notHandled', reason, message, events };
}

function wait(reason: WaitReason, message: string, events: DecisionEvent[], sidecars: readonly Sidecar[]): Wait {
  return { kind: 'wait', reason, message, events, containers: sidecars.map((s) => s.name) };
}

function plural(names: readonly string[]): string {
  return names.length === 1 ? '' : 's';
}

/** An event key that names what it reports but stays short, however many names there are. */
function boundedKey(reason: string, parts: readonly string[]): string {
  const shown = parts.slice(0, 3).map((p) => clip(p, 100));
  return `${reason}/${shown.join(',')}${parts.length > shown.length ? `,+${parts.length - shown.length}` : ''}`;
}

/**
 * The Warning for a request the API server refused as invalid (or forbidden): the controller gives
 * it once and tries again only after a long delay, instead of failing in a loop with a log line.
 */
export function requestRejectedWarning(decision: CreateRequest, apiMessage: string, retryInSeconds: number): DecisionEvent {
  const name = decision.request.metadata.name ?? '';
  return warning(
    EVENT_REASONS.requestRejected,
    `${EVENT_REASONS.requestRejected}/${name}`,
    `The API server rejected ContainerRecreateRequest ${name} for sidecar${plural(decision.containers)} ` +
      `${quoteList(decision.containers)}: ${clip(apiMessage, 400)}. Trying again in ${retryInSeconds}s.`,
  );
}
