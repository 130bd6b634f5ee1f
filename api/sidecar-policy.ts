// The sidecar policy resources (R54): ClusterSidecarPolicy (cluster-scoped, written by cluster
// administrators) and SidecarPolicy (namespaced, applies in its own namespace only).
import { resourcePath } from '../common/kube/paths.ts';
import { API_VERSION } from './container-recreate-request.ts';

export const CLUSTER_POLICY_KIND = 'ClusterSidecarPolicy';
export const NAMESPACED_POLICY_KIND = 'SidecarPolicy';
const CLUSTER_POLICY_PLURAL = 'clustersidecarpolicies';
const NAMESPACED_POLICY_PLURAL = 'sidecarpolicies';

export const clusterPolicyPath = (name?: string, subresource?: string) =>
  resourcePath(API_VERSION, CLUSTER_POLICY_PLURAL, undefined, name, subresource);
export const namespacedPolicyPath = (namespace?: string, name?: string, subresource?: string) =>
  resourcePath(API_VERSION, NAMESPACED_POLICY_PLURAL, namespace, name, subresource);

/** The conditions a policy's status carries: whether the controller could read it, and the same as Ready (for kstatus, Flux, `kubectl wait`). */
export const POLICY_CONDITION_VALID = 'Valid';
export const POLICY_CONDITION_READY = 'Ready';

export interface PolicyCondition {
  type: string;
  status: 'True' | 'False';
  reason: string;
  message: string;
  lastTransitionTime: string;
  /** The policy's generation the condition describes. */
  observedGeneration?: number;
}

/** A Pod a policy acted on (Enforce), or would have (Audit), and when. */
export interface ActedOnPod {
  namespace: string;
  name: string;
  time: string;
}

/** The last Pods kept in a policy's status, per mode. */
export const MAX_RECENT_PODS = 5;

/** The Pods a policy acted on in one mode: how many, and the last few (newest first, MAX_RECENT_PODS). */
export interface ActedOnPods {
  pods: number;
  recent: ActedOnPod[];
}

/** What the controller writes to a policy's status. */
export interface SidecarPolicyStatus {
  observedGeneration?: number;
  /** Pods in which the policy marks a container, among the Pods the controller watches now. */
  matchedPods?: number;
  /** Pods whose sidecars the policy would have stopped in Audit (each once), and the last few. */
  audit?: ActedOnPods;
  /** Pods whose sidecars the policy had stopped in Enforce (each once), and the last few. */
  enforce?: ActedOnPods;
  conditions?: PolicyCondition[];
}
