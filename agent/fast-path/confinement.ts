// Whether this agent may create requests itself (the fast path: docs/design.md, R50). Decided from
// what the API server does, not from its version: two dry-run creates, one labelled with this node
// and one with another. Only when the first is admitted and the second is denied by the agent
// policy is the agent confined to its own node; anything else leaves creation to the controller,
// which creates the same request one kubelet report later.
import type { KubeApi } from '../../common/kube/api.ts';
import type { Logger } from '../../common/log.ts';
import { errorMessage, statusCode } from '../../common/log.ts';
import type { ContainerRecreateRequest } from '../../api/container-recreate-request.ts';
import { API_VERSION, KIND, LABEL_NODE_NAME, requestPath } from '../../api/container-recreate-request.ts';

/** The ValidatingAdmissionPolicy that confines an agent to its node (manifests/policies). */
export const AGENT_POLICY = 'agent-requests.sidecar-terminator.dev';
/** The names in the agent's messages are the shipped ones: an overlay or the chart may have renamed them. */
const INSTALL_NAMES = ' (names as shipped: with the prefix or suffix of your install, if any)';
/** Checked again at least this often: the policies or the permission may be installed or removed later. */
export const FAST_PATH_RECHECK_MS = 300_000;
/** The first re-check while the fast path is off, doubling up to FAST_PATH_RECHECK_MS. */
export const FAST_PATH_FIRST_RETRY_MS = 10_000;

/** How the API server answered one dry-run create. */
export type DryRunOutcome = 'admitted' | 'denied-by-policy' | 'forbidden' | 'failed';

export type FastPathState =
  /** Admitted for this node, denied by the agent policy for another: the agent creates requests. */
  | 'enabled'
  /** No permission to create requests (manifests/base alone, as on 1.27-1.29). */
  | 'no-permission'
  /** The API server would let this agent create requests for any node. */
  | 'not-confined'
  /** The agent policy denies even this node: the API server puts no node name in the token (before 1.30). */
  | 'no-node-in-token'
  /** The check failed or gave an answer none of the above explains. */
  | 'unknown';

export const FAST_PATH_STATES: readonly FastPathState[] = ['enabled', 'no-permission', 'not-confined', 'no-node-in-token', 'unknown'];

export function dryRunOutcome(err: unknown): DryRunOutcome {
  if (err === undefined) return 'admitted';
  if (errorMessage(err).includes(AGENT_POLICY)) return 'denied-by-policy';
  return statusCode(err) === 403 ? 'forbidden' : 'failed';
}

export function fastPathState(ownNode: DryRunOutcome, otherNode: DryRunOutcome): FastPathState {
  if (ownNode === 'failed' || otherNode === 'failed') return 'unknown';
  if (otherNode === 'admitted') return 'not-confined';
  if (ownNode === 'forbidden') return 'no-permission';
  if (ownNode === 'denied-by-policy') return 'no-node-in-token';
  return otherNode === 'denied-by-policy' ? 'enabled' : 'unknown';
}

/** What the log says about each state, for an operator deciding whether to act. */
export function describeFastPath(state: FastPathState): { level: 'info' | 'warn' | 'error'; message: string } {
  switch (state) {
    case 'enabled':
      return { level: 'info', message: 'fast path on: this agent creates the first request of a Pod whose mains it sees exit; the API server confines it to this node' };
    case 'no-permission':
      return { level: 'info', message: 'fast path off: no permission to create requests (manifests/policies not installed; it needs Kubernetes 1.30+); the controller creates every request' };
    case 'not-confined':
      return { level: 'error', message: `fast path off: the API server would let this agent create requests for any node (policy ${AGENT_POLICY} not in force); remove the ClusterRoleBinding sidecar-terminator-agent-requests or install manifests/policies${INSTALL_NAMES}` };
    case 'no-node-in-token':
      return { level: 'warn', message: 'fast path off: the agent policy denies this node too (the ServiceAccount token carries no node name before Kubernetes 1.30); the controller creates every request' };
    case 'unknown':
      return { level: 'warn', message: 'fast path off until the check succeeds; the controller creates every request' };
  }
}

/**
 * An agent that could create requests for any node holds a permission nothing confines. It never
 * uses it (the fast path is off), but that must not go unseen: it reports not ready, with this
 * reason on /readyz, so the DaemonSet's rollout stalls and `kubectl get pods` shows 0/1, besides
 * the error log line and `sidecar_terminator_agent_fast_path{state="not-confined"}`. Its work is
 * unchanged: readiness routes no traffic to it.
 */
export function notConfinedReason(state: FastPathState): string | undefined {
  if (state !== 'not-confined') return undefined;
  return `not confined to its node: the API server would let this agent create requests for any node (policy ${AGENT_POLICY} does not match its ServiceAccount, or is not installed); it creates none, but remove the ClusterRoleBinding sidecar-terminator-agent-requests or install manifests/policies for this ServiceAccount${INSTALL_NAMES}`;
}

/** A request the API server validates like a real one; sent with dryRun=All, so never stored. */
function probeRequest(namespace: string, nodeName: string): ContainerRecreateRequest {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: 'sidecar-terminator-fast-path-check', namespace, labels: { [LABEL_NODE_NAME]: nodeName } },
    spec: { podName: 'fast-path-check', containers: [{ name: 'check' }] },
  };
}

/** A node name that is not this node's, for the request the policy must deny. */
export function otherNodeName(nodeName: string): string {
  return nodeName === 'fast-path-check-other-node' ? 'fast-path-check-another-node' : 'fast-path-check-other-node';
}

/**
 * When to check again, after `offChecks` checks in a row that found the fast path off. Soon at
 * first: installed together, the agent can start before kube-apiserver enforces the new policy
 * (seen: `not-confined` for a few seconds after a Helm install). Then less and less often, so a
 * fleet on a release without the policy API sends few dry runs.
 */
export function nextCheckMs(state: FastPathState, offChecks: number): number {
  if (state === 'enabled') return FAST_PATH_RECHECK_MS;
  return Math.min(FAST_PATH_RECHECK_MS, FAST_PATH_FIRST_RETRY_MS * 2 ** Math.max(0, offChecks - 1));
}

export interface ConfinementCheckDeps {
  client: Pick<KubeApi, 'create'>;
  nodeName: string;
  /** Where the dry-run requests are addressed (the agent's own namespace). */
  namespace: string;
  log: Logger;
  /** Called with every state decided, including the first. */
  onState: (state: FastPathState) => void;
}

/** Keeps the fast path's state current: checked at start, then as nextCheckMs says. */
export class ConfinementCheck {
  private state: FastPathState = 'unknown';
  /** Checks in a row that found the fast path off. */
  private offChecks = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly deps: ConfinementCheckDeps;

  constructor(deps: ConfinementCheckDeps) {
    this.deps = deps;
  }

  enabled(): boolean {
    return this.state === 'enabled';
  }

  /** Why the agent is not ready on account of the fast path (notConfinedReason), or undefined. */
  notReadyReason(): string | undefined {
    return notConfinedReason(this.state);
  }

  start(): Promise<FastPathState> {
    return this.check();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private async check(): Promise<FastPathState> {
    const { client, nodeName, namespace, log } = this.deps;
    const outcome = (node: string) =>
      client.create(requestPath(namespace), probeRequest(namespace, node), { dryRun: 'All' }).then(() => dryRunOutcome(undefined), dryRunOutcome);
    const [own, other] = await Promise.all([outcome(nodeName), outcome(otherNodeName(nodeName))]);
    const state = fastPathState(own, other);
    if (state !== this.state || !this.timer) {
      const { level, message } = describeFastPath(state);
      log[level](message, { fastPath: state, ownNode: own, otherNode: other });
    }
    this.state = state;
    this.offChecks = state === 'enabled' ? 0 : this.offChecks + 1;
    this.deps.onState(state);
    if (!this.stopped) {
      this.timer = setTimeout(() => void this.check().catch((err: unknown) => log.warn('fast path check failed', { error: errorMessage(err) })), nextCheckMs(state, this.offChecks));
      this.timer.unref();
    }
    return state;
  }
}
