// The cluster controller's configuration, from flags.
import { MAX_ACTIVE_DEADLINE_SECONDS, MAX_TTL_SECONDS_AFTER_FINISHED, MIN_ACTIVE_DEADLINE_SECONDS } from '../api/container-recreate-request.ts';
import { MAX_IMAGE_REFERENCE_LENGTH } from '../rules/projection.ts';
import { DEFAULT_OPTIONS, MIN_REQUEST_TTL_SECONDS, RELEASED_QUICK_EXIT_IMAGE, REQUEST_TTL_FLOOR } from '../rules/requests.ts';
import { type ApiRateConfig, apiRateFlags } from '../common/api-rate-flags.ts';
import {
  COMMON_OPTIONS, COMMON_USAGE, FlagError, type LogFormat, type LogLevel, METRICS_PORT_RENAMED, type RenamedFlag,
  bareBoolFlags, bindAddress, boolFlag, durationSeconds, intInRange, logFormat, logLevel, parseFlags, positiveInt,
} from '../common/flags.ts';

/** The longest wait for sidecars that never started: a day (a longer one only keeps a failed Job's Pod running). */
export const MAX_SIDECAR_START_TIMEOUT_SECONDS = 86_400;

/** The longest wait for an agent before a node counts as agentless: an hour. */
export const MAX_AGENTLESS_AFTER_SECONDS = 3600;
export const DEFAULT_AGENT_POD_SELECTOR = 'app.kubernetes.io/name=sidecar-terminator,app.kubernetes.io/component=agent';

/** The controller's former flag names, taken for one release. */
export const CONTROLLER_RENAMED_FLAGS: readonly RenamedFlag[] = [
  METRICS_PORT_RENAMED,
  { old: 'lease-name', current: 'leader-elect-resource-name' },
  { old: 'lease-namespace', current: 'leader-elect-resource-namespace' },
];

export interface ControllerConfig extends ApiRateConfig {
  kubeconfig?: string;
  /** Where /metrics, /healthz and /readyz listen (--metrics-bind-address): every interface when undefined. */
  metricsHost: string | undefined;
  metricsPort: number;
  workers: number;
  resyncSeconds: number;
  leaderElect: boolean;
  leaseNamespace: string;
  leaseName: string;
  /** How long a standby waits, from the last renewal it saw, before taking the Lease over. */
  leaseDurationSeconds: number;
  /** How long the leader goes on acting after the last renewal it sent. */
  renewDeadlineSeconds: number;
  /** How often the leader renews the Lease, and a standby tries to take it. */
  retryPeriodSeconds: number;
  /** activeDeadlineSeconds of the requests the sidecar terminator creates. */
  requestDeadlineSeconds: number;
  /** ttlSecondsAfterFinished of the requests the sidecar terminator creates. */
  requestTTLSeconds: number;
  /** How long sidecars that never started are waited for after the main containers finished. */
  sidecarStartTimeoutSeconds: number;
  /** Nodes where no agent runs, by label selector; empty: none (R22). */
  agentlessNodeSelector: string;
  /** How long a node goes without a running agent before its Pods get image swaps; 0: never. */
  agentlessAfterSeconds: number;
  /** The images a sidecar may be swapped for on those nodes, by repository or in full (R22). */
  agentlessSwapImages: string[];
  /** R56: write the phase kubelet settled from its report (--settled-phase). */
  settledPhase: boolean;
  /** The agent Pods' labels, in the controller's own namespace (env POD_NAMESPACE). */
  agentPodSelector: string;
  agentNamespace: string;
  logLevel: LogLevel;
  logFormat: LogFormat;
  /** A line for each former flag name given, logged at start-up. */
  deprecations: string[];
}

const API_RATE = apiRateFlags('controller');

export const CONTROLLER_USAGE = `usage: sidecar-terminator controller [flags]
  --kubeconfig PATH                 kubeconfig (default: in-cluster, or env KUBECONFIG)
  --metrics-bind-address ADDR       [HOST]:PORT of /metrics, /healthz, /readyz (default :9441, every interface);
                                    not 0: the probes ask the same port
  --workers N                       objects processed at once, per queue (default 32)
  --resync-seconds N                re-check every Pod and request this often (default 60)
  --leader-elect[=true|false]       run as one of several replicas (default true)
  --leader-elect-resource-namespace NS
                                    namespace of the leader Lease (default: env POD_NAMESPACE, else sidecar-terminator)
  --leader-elect-resource-name NAME name of the leader Lease (default sidecar-terminator-controller)
  --leader-elect-lease-duration D   how long a standby waits without seeing a renewal before it takes the Lease
                                    over, whole seconds (default 15s)
  --leader-elect-renew-deadline D   how long the leader acts without a successful renewal; shorter than the lease
                                    duration (default 10s)
  --leader-elect-retry-period D     how often the leader renews, and a standby tries; shorter than the renew
                                    deadline (default 2s)
  --request-deadline-seconds N      activeDeadlineSeconds of the requests it creates, ${MIN_ACTIVE_DEADLINE_SECONDS} to ${MAX_ACTIVE_DEADLINE_SECONDS} (default ${DEFAULT_OPTIONS.activeDeadlineSeconds})
  --request-ttl-seconds N           ttlSecondsAfterFinished of the requests it creates, at most ${MAX_TTL_SECONDS_AFTER_FINISHED} (default ${DEFAULT_OPTIONS.ttlSecondsAfterFinished});
                                    at least ${MIN_REQUEST_TTL_SECONDS}: ${REQUEST_TTL_FLOOR}
  --sidecar-start-timeout-seconds N how long sidecars that never started (image pull or config error) are waited
                                    for after the main containers finished; then the Pod's phase is set without
                                    them, Succeeded only if every main exited 0; at most ${MAX_SIDECAR_START_TIMEOUT_SECONDS} (default ${DEFAULT_OPTIONS.sidecarStartTimeoutSeconds})
  --settled-phase[=true|false]      when kubelet reports every container of a Pod exited 0, write the Succeeded
                                    it settled rather than wait for its own write, a second or more later (default true)
  --agentless-node-selector SEL     nodes where no agent can run (label selector, e.g. eks.amazonaws.com/compute-type=fargate):
                                    their Pods' sidecars get the ..._WITH_IMAGE swap at once (default: none)
  --agentless-after-seconds N       a node where no agent container has run for this long is treated the same way;
                                    0: never, at most ${MAX_AGENTLESS_AFTER_SECONDS} (default 120)
  --agentless-swap-images LIST      the only ..._WITH_IMAGE images swapped in on those nodes, comma-separated: a
                                    repository allows its every tag and digest, a reference with a tag or digest
                                    that image alone; empty: none (default ${RELEASED_QUICK_EXIT_IMAGE})
  --agent-pod-selector SEL          the labels of the agent Pods, in the controller's namespace (default ${DEFAULT_AGENT_POD_SELECTOR})
${API_RATE.usage}
${COMMON_USAGE}
deprecated, taken until the next release:
  --metrics-port N                  --metrics-bind-address=:N
  --lease-namespace NS              --leader-elect-resource-namespace=NS
  --lease-name NAME                 --leader-elect-resource-name=NAME`;

export function parseControllerConfig(argv: string[], env: NodeJS.ProcessEnv): ControllerConfig {
  const { values, deprecations } = parseFlags(CONTROLLER_USAGE, {
    args: bareBoolFlags(argv, ['leader-elect', 'settled-phase']),
    options: {
      ...COMMON_OPTIONS,
      kubeconfig: { type: 'string' },
      'metrics-bind-address': { type: 'string', default: ':9441' },
      workers: { type: 'string', default: '32' },
      'resync-seconds': { type: 'string', default: '60' },
      'leader-elect': { type: 'string', default: 'true' },
      'leader-elect-resource-namespace': { type: 'string' },
      'leader-elect-resource-name': { type: 'string', default: 'sidecar-terminator-controller' },
      'leader-elect-lease-duration': { type: 'string', default: '15s' },
      'leader-elect-renew-deadline': { type: 'string', default: '10s' },
      'leader-elect-retry-period': { type: 'string', default: '2s' },
      'request-deadline-seconds': { type: 'string', default: String(DEFAULT_OPTIONS.activeDeadlineSeconds) },
      'request-ttl-seconds': { type: 'string', default: String(DEFAULT_OPTIONS.ttlSecondsAfterFinished) },
      'sidecar-start-timeout-seconds': { type: 'string', default: String(DEFAULT_OPTIONS.sidecarStartTimeoutSeconds) },
      'settled-phase': { type: 'string', default: 'true' },
      'agentless-node-selector': { type: 'string', default: '' },
      'agentless-after-seconds': { type: 'string', default: '120' },
      'agentless-swap-images': { type: 'string', default: RELEASED_QUICK_EXIT_IMAGE },
      'agent-pod-selector': { type: 'string', default: DEFAULT_AGENT_POD_SELECTOR },
      ...API_RATE.options,
    },
    strict: true,
  }, CONTROLLER_RENAMED_FLAGS);
  const metrics = bindAddress('metrics-bind-address', values['metrics-bind-address']);
  const deadline = intInRange('request-deadline-seconds', values['request-deadline-seconds'], MIN_ACTIVE_DEADLINE_SECONDS, MAX_ACTIVE_DEADLINE_SECONDS);
  const ttl = intInRange('request-ttl-seconds', values['request-ttl-seconds'], MIN_REQUEST_TTL_SECONDS, MAX_TTL_SECONDS_AFTER_FINISHED, REQUEST_TTL_FLOOR);
  const startTimeout = intInRange('sidecar-start-timeout-seconds', values['sidecar-start-timeout-seconds'], 1, MAX_SIDECAR_START_TIMEOUT_SECONDS);
  return {
    kubeconfig: values.kubeconfig ?? env.KUBECONFIG,
    metricsHost: metrics.host,
    metricsPort: metrics.port,
    workers: positiveInt('workers', values.workers),
    resyncSeconds: positiveInt('resync-seconds', values['resync-seconds']),
    leaderElect: boolFlag('leader-elect', values['leader-elect']),
    // Empty, as the chart's default: the Pod's own namespace.
    leaseNamespace: values['leader-elect-resource-namespace'] || (env.POD_NAMESPACE ?? 'sidecar-terminator'),
    leaseName: nonEmpty('leader-elect-resource-name', values['leader-elect-resource-name']),
    ...leaseTimings(values),
    requestDeadlineSeconds: deadline,
    requestTTLSeconds: ttl,
    sidecarStartTimeoutSeconds: startTimeout,
    settledPhase: boolFlag('settled-phase', values['settled-phase']),
    agentlessNodeSelector: values['agentless-node-selector'].trim(),
    agentlessAfterSeconds: intInRange('agentless-after-seconds', values['agentless-after-seconds'], 0, MAX_AGENTLESS_AFTER_SECONDS),
    agentlessSwapImages: imageList('agentless-swap-images', values['agentless-swap-images']),
    agentPodSelector: nonEmpty('agent-pod-selector', values['agent-pod-selector']),
    agentNamespace: env.POD_NAMESPACE ?? 'sidecar-terminator',
    ...API_RATE.parse(values),
    logLevel: logLevel(values, env),
    logFormat: logFormat(values['log-format']),
    deprecations,
  };
}

/** client-go's lease timings, checked as its leader elector checks them, so that a bad one is a bad flag. */
function leaseTimings(values: Record<'leader-elect-lease-duration' | 'leader-elect-renew-deadline' | 'leader-elect-retry-period', string>) {
  const leaseDurationSeconds = durationSeconds('leader-elect-lease-duration', values['leader-elect-lease-duration']);
  const renewDeadlineSeconds = durationSeconds('leader-elect-renew-deadline', values['leader-elect-renew-deadline']);
  const retryPeriodSeconds = durationSeconds('leader-elect-retry-period', values['leader-elect-retry-period']);
  // The Lease holds its duration in whole seconds.
  if (!Number.isInteger(leaseDurationSeconds)) {
    throw new FlagError(`--leader-elect-lease-duration must be whole seconds, got ${JSON.stringify(values['leader-elect-lease-duration'])}`);
  }
  if (!(renewDeadlineSeconds < leaseDurationSeconds)) {
    throw new FlagError(`--leader-elect-renew-deadline (${values['leader-elect-renew-deadline']}) must be shorter than --leader-elect-lease-duration (${values['leader-elect-lease-duration']})`);
  }
  if (!(retryPeriodSeconds < renewDeadlineSeconds)) {
    throw new FlagError(`--leader-elect-retry-period (${values['leader-elect-retry-period']}) must be shorter than --leader-elect-renew-deadline (${values['leader-elect-renew-deadline']})`);
  }
  return { leaseDurationSeconds, renewDeadlineSeconds, retryPeriodSeconds };
}

/** Image references, comma-separated; each one word, no longer than a reference the API server keeps. */
function imageList(flag: string, value: string): string[] {
  const images = value.split(',').map((i) => i.trim()).filter((i) => i !== '');
  const bad = images.find((i) => /\s/.test(i) || i.length > MAX_IMAGE_REFERENCE_LENGTH);
  if (bad !== undefined) throw new FlagError(`--${flag}: ${JSON.stringify(bad.slice(0, 80))} is not an image reference`);
  return images;
}

function nonEmpty(flag: string, value: string): string {
  if (!value.trim()) throw new FlagError(`--${flag} must not be empty`);
  return value.trim();
}
