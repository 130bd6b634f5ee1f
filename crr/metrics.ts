// The cluster controller's figures, on its /metrics.
import { Counter, Gauge, Histogram } from 'prom-client';
import { processRegistry, programMetrics } from '../common/metrics.ts';

export function createControllerMetrics() {
  const registry = processRegistry();
  return {
    registry,
    ...programMetrics(registry, 'controller'),
    isLeader: new Gauge({ name: 'sidecar_terminator_controller_is_leader', help: '1 while this replica is the leader.', registers: [registry] }),
    requestActions: new Counter({
      name: 'sidecar_terminator_controller_request_actions_total',
      help: 'Actions on ContainerRecreateRequests (admit, complete, deactivate, delete).',
      labelNames: ['action'] as const,
      registers: [registry],
    }),
    decisions: new Counter({
      name: 'sidecar_terminator_controller_decisions_total',
      help: 'Decisions about Job Pods with sidecars, by outcome.',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    heldPods: new Gauge({
      name: 'sidecar_terminator_controller_pods_held_by_unmarked_sidecars',
      help: 'Pods kept running by a well-known sidecar nobody marked, after their other containers finished, by sidecar.',
      labelNames: ['sidecar'] as const,
      registers: [registry],
    }),
    policyAuditPods: new Counter({
      name: 'sidecar_terminator_controller_policy_audit_pods_total',
      help: 'Pods an Audit sidecar policy would have stopped sidecars of (each Pod once), by cluster policy, or by namespace for namespaced ones.',
      labelNames: ['policy'] as const,
      registers: [registry],
    }),
    policyEnforcedPods: new Counter({
      name: 'sidecar_terminator_controller_policy_enforced_pods_total',
      help: 'Pods an Enforce sidecar policy had sidecars of stopped, by a request (the controller\'s or the agent\'s) or an image swap (each Pod once), by cluster policy, or by namespace for namespaced ones.',
      labelNames: ['policy'] as const,
      registers: [registry],
    }),
    namespacePoliciesMax: new Gauge({
      name: 'sidecar_terminator_controller_namespace_policies_max',
      help: 'The most SidecarPolicies one namespace holds (valid or not): a namespace\'s editors can create any number unless a ResourceQuota caps them. Which one: kubectl get sidecarpolicies -A.',
      registers: [registry],
    }),
    invalidPolicies: new Gauge({
      name: 'sidecar_terminator_controller_invalid_policies',
      help: 'Sidecar policies not in effect because the controller cannot read them (their Valid condition says why), by kind.',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    requestsCreated: new Counter({ name: 'sidecar_terminator_controller_requests_created_total', help: 'Requests created to stop sidecars.', registers: [registry] }),
    retries: new Counter({ name: 'sidecar_terminator_controller_retries_total', help: 'Further requests created because a sidecar was still running after the previous one.', registers: [registry] }),
    swapsRefused: new Counter({
      name: 'sidecar_terminator_controller_image_swaps_refused_total',
      help: 'Pods not swapped on a node without an agent: a sidecar\'s ..._WITH_IMAGE is not on --agentless-swap-images (once per Pod and image).',
      registers: [registry],
    }),
    imagePatches: new Counter({ name: 'sidecar_terminator_controller_image_patches_total', help: 'Pods whose sidecar images were swapped on virtual nodes.', registers: [registry] }),
    phasePatches: new Counter({
      name: 'sidecar_terminator_controller_phase_patches_total',
      help: 'Pod phases set by the controller, by phase and cause (ignoreExitCode, restartLoop, sidecarNotStarted, allSucceeded).',
      labelNames: ['phase', 'cause'] as const,
      registers: [registry],
    }),
    actionLatency: new Histogram({
      name: 'sidecar_terminator_controller_action_latency_seconds',
      help: 'Time from the Pod update that made its main containers done to the action taken.',
      labelNames: ['action'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    watchRestarts: new Counter({
      name: 'sidecar_terminator_controller_watch_restarts_total',
      help: 'Watches restarted after an error, by resource.',
      labelNames: ['resource'] as const,
      registers: [registry],
    }),
    unreadableObjects: new Counter({
      name: 'sidecar_terminator_controller_unreadable_objects_total',
      help: 'Objects left out of a list or watch because they could not be read (served over the answer cap, or not JSON), by resource.',
      labelNames: ['resource'] as const,
      registers: [registry],
    }),
  };
}

export type ControllerMetrics = ReturnType<typeof createControllerMetrics>;
