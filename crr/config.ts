// The cluster controller's configuration, from flags.
import { MAX_ACTIVE_DEADLINE_SECONDS, MAX_TTL_SECONDS_AFTER_FINISHED, MIN_ACTIVE_DEADLINE_SECONDS } from '../api/container-recreate-request.ts';
import { COMMON_OPTIONS, COMMON_USAGE, type LogLevel, bareBoolFlags, boolFlag, intInRange, logLevel, parseFlags, positiveInt } from '../common/flags.ts';

/** The longest wait for sidecars that never started: a day (a longer one only keeps a failed Job's Pod running). */
export const MAX_SIDECAR_START_TIMEOUT_SECONDS = 86_400;

export interface ControllerConfig {
  kubeconfig?: string;
  metricsPort: number;
  workers: number;
  resyncSeconds: number;
  leaderElect: boolean;
  leaseNamespace: string;
  leaseName: string;
  /** activeDeadlineSeconds of the requests the sidecar terminator creates. */
  requestDeadlineSeconds: number;
  /** ttlSecondsAfterFinished of the requests the sidecar terminator creates. */
  requestTTLSeconds: number;
  /** How long sidecars that never started are waited for after the main containers finished. */
  sidecarStartTimeoutSeconds: number;
  logLevel: LogLevel;
}

export const CONTROLLER_USAGE = `usage: sidecar-terminator controller [flags]
  --kubeconfig PATH                 kubeconfig (default: in-cluster, or env KUBECONFIG)
  --metrics-port N                  port of /metrics, /healthz, /readyz (default 9441)
  --workers N                       objects processed at once, per queue (default 32)
  --resync-seconds N                re-check every Pod and request this often (default 60)
  --leader-elect[=true|false]       run as one of several replicas (default true)
  --lease-namespace NS              namespace of the leader Lease (default: env POD_NAMESPACE, else sidecar-terminator)
  --lease-name NAME                 name of the leader Lease (default sidecar-terminator-controller)
  --request-deadline-seconds N      activeDeadlineSeconds of the requests it creates, ${MIN_ACTIVE_DEADLINE_SECONDS} to ${MAX_ACTIVE_DEADLINE_SECONDS} (default 300)
  --request-ttl-seconds N           ttlSecondsAfterFinished of the requests it creates, at most ${MAX_TTL_SECONDS_AFTER_FINISHED} (default 600)
  --sidecar-start-timeout-seconds N how long sidecars that never started (image pull or config error) are waited
                                    for after the main containers finished; then the Pod's phase is set without
                                    them, Succeeded only if every main exited 0; at most ${MAX_SIDECAR_START_TIMEOUT_SECONDS} (default 120)
${COMMON_USAGE}`;

export function parseControllerConfig(argv: string[], env: NodeJS.ProcessEnv): ControllerConfig {
  const { values } = parseFlags(CONTROLLER_USAGE, {
    args: bareBoolFlags(argv, ['leader-elect']),
    options: {
      ...COMMON_OPTIONS,
      kubeconfig: { type: 'string' },
      'metrics-port': { type: 'string', default: '9441' },
      workers: { type: 'string', default: '32' },
      'resync-seconds': { type: 'string', default: '60' },
      'leader-elect': { type: 'string', default: 'true' },
      'lease-namespace': { type: 'string' },
      'lease-name': { type: 'string', default: 'sidecar-terminator-controller' },
      'request-deadline-seconds': { type: 'string', default: '300' },
      'request-ttl-seconds': { type: 'string', default: '600' },
      'sidecar-start-timeout-seconds': { type: 'string', default: '120' },
    },
    strict: true,
  });
  const deadline = intInRange('request-deadline-seconds', values['request-deadline-seconds'], MIN_ACTIVE_DEADLINE_SECONDS, MAX_ACTIVE_DEADLINE_SECONDS);
  const ttl = intInRange('request-ttl-seconds', values['request-ttl-seconds'], 1, MAX_TTL_SECONDS_AFTER_FINISHED);
  const startTimeout = intInRange('sidecar-start-timeout-seconds', values['sidecar-start-timeout-seconds'], 1, MAX_SIDECAR_START_TIMEOUT_SECONDS);
  return {
    kubeconfig: values.kubeconfig ?? env.KUBECONFIG,
    metricsPort: positiveInt('metrics-port', values['metrics-port']),
    workers: positiveInt('workers', values.workers),
    resyncSeconds: positiveInt('resync-seconds', values['resync-seconds']),
    leaderElect: boolFlag('leader-elect', values['leader-elect']),
    leaseNamespace: values['lease-namespace'] ?? env.POD_NAMESPACE ?? 'sidecar-terminator',
    leaseName: values['lease-name'],
    requestDeadlineSeconds: deadline,
    requestTTLSeconds: ttl,
    sidecarStartTimeoutSeconds: startTimeout,
    logLevel: logLevel(values['log-level'], env),
  };
}
