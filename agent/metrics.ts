// This node's figures, on the agent's /metrics.
import { Counter, Gauge, Histogram } from 'prom-client';
import { processRegistry, programMetrics } from '../common/metrics.ts';

/** From a millisecond (the floor: an exit event and a runtime call) to the longest grace period. */
const STEP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

export function createAgentMetrics() {
  const registry = processRegistry();
  return {
    registry,
    ...programMetrics(registry, 'agent'),
    requestsCompleted: new Counter({
      name: 'sidecar_terminator_agent_requests_completed_total',
      help: 'Requests this agent completed, by outcome (succeeded: every container Succeeded; failed: some Failed; refused: could not be carried out).',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    requestsRefused: new Counter({
      name: 'sidecar_terminator_agent_requests_refused_total',
      help: 'Requests refused because they do not match their Pod, nothing executed, by reason (pod-uid-mismatch, other-node, runtime-owner-missing: the container has no kubelet labels, runtime-owner-mismatch: its kubelet labels name another Pod or container).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    stopsResumed: new Counter({
      name: 'sidecar_terminator_agent_stops_resumed_total',
      help: 'Stops an earlier agent had begun (isKilled recorded, container still running), finished without running the preStop hook again.',
      registers: [registry],
    }),
    fastPath: new Gauge({
      name: 'sidecar_terminator_agent_fast_path',
      help: 'The fast path\'s state: 1 for the current one (enabled: this agent creates first requests itself, confined to its node by the agent policy; no-permission, not-confined, no-node-in-token, unknown: it does not, and the controller creates every request).',
      labelNames: ['state'] as const,
      registers: [registry],
    }),
    requestsOnExit: new Counter({
      name: 'sidecar_terminator_agent_requests_on_exit_total',
      help: 'First requests for a Pod\'s sidecars that the agent made on seeing its main containers exit in the runtime, by result (created; existed: the controller or an earlier try was first; policies-not-current: a policy marks a container of the Pod and the agent\'s policy watch is not current, so the controller creates it).',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    exitEventDelay: new Histogram({
      name: 'sidecar_terminator_agent_exit_event_delay_seconds',
      help: 'Time from a container\'s exit (the runtime\'s own timestamp) to its exit event reaching the agent.',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
      registers: [registry],
    }),
    exitToRequest: new Histogram({
      name: 'sidecar_terminator_agent_exit_to_request_seconds',
      help: 'Time from the exit event that completed a Pod\'s mains to the agent having created its request.',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
      registers: [registry],
    }),
    stopSeconds: new Histogram({
      name: 'sidecar_terminator_agent_stop_seconds',
      help: 'Time from a request first seen by the agent to its container having exited.',
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120],
      registers: [registry],
    }),
    stopSteps: new Histogram({
      name: 'sidecar_terminator_agent_step_seconds',
      help: 'The steps of a container stop, in order: acting (the request known to the agent, created by it or seen on its watch, to the agent acting on it), prestop_done (acting to the preStop hook done; only with a hook), stop_sent (the step before to CRI StopContainer sent, the SIGTERM), container_exited (StopContainer sent to the container exited).',
      labelNames: ['step'] as const,
      buckets: STEP_BUCKETS,
      registers: [registry],
    }),
    exitToStopSent: new Histogram({
      name: 'sidecar_terminator_agent_exit_to_stop_sent_seconds',
      help: 'Time from the exit that completed a Pod\'s mains (the runtime\'s own timestamp) to StopContainer sent for its sidecar, for requests the agent created on that exit.',
      buckets: STEP_BUCKETS,
      registers: [registry],
    }),
    containerStops: new Counter({
      name: 'sidecar_terminator_agent_container_stops_total',
      help: 'Container stops issued, by result.',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    runtimeErrors: new Counter({
      name: 'sidecar_terminator_agent_runtime_errors_total',
      help: 'Failed container runtime calls, by method.',
      labelNames: ['method'] as const,
      registers: [registry],
    }),
    watchRestarts: new Counter({
      name: 'sidecar_terminator_agent_watch_restarts_total',
      help: 'Watches restarted after an error, by resource.',
      labelNames: ['resource'] as const,
      registers: [registry],
    }),
    unreadableObjects: new Counter({
      name: 'sidecar_terminator_agent_unreadable_objects_total',
      help: 'Objects left out of a list or watch because they could not be read (served over the answer cap, or not JSON), by resource.',
      labelNames: ['resource'] as const,
      registers: [registry],
    }),
  };
}

export type AgentMetrics = ReturnType<typeof createAgentMetrics>;
