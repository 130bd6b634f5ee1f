// The cluster controller's configuration, from flags.
import { parseFlags, positiveInt } from '../agent/config.ts';

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
}

export const CONTROLLER_USAGE = `usage: sidecar-terminator controller [flags]
  --kubeconfig PATH                 kubeconfig (default: in-cluster, or env KUBECONFIG)
  --metrics-port N                  port of /metrics, /healthz, /readyz (default 9441)
  --workers N                       objects processed at once, per queue (default 32)
  --resync-seconds N                re-check every Pod and request this often (default 60)
  --leader-elect true|false         run as one of several replicas (default true)
  --lease-namespace NS              namespace of the leader Lease (default: env POD_NAMESPACE, else sidecar-terminator)
  --lease-name NAME                 name of the leader Lease (default sidecar-terminator-controller)
  --request-deadline-seconds N      activeDeadlineSeconds of the requests it creates (default 300)
  --request-ttl-seconds N           ttlSecondsAfterFinished of the requests it creates (default 600)`;

export function parseControllerConfig(argv: string[], env: NodeJS.ProcessEnv): ControllerConfig {
  const { values } = parseFlags(CONTROLLER_USAGE, {
    args: argv,
    options: {
      kubeconfig: { type: 'string' },
      'metrics-port': { type: 'string', default: '9441' },
      workers: { type: 'string', default: '32' },
      'resync-seconds': { type: 'string', default: '60' },
      'leader-elect': { type: 'string', default: 'true' },
      'lease-namespace': { type: 'string' },
      'lease-name': { type: 'string', default: 'sidecar-terminator-controller' },
      'request-deadline-seconds': { type: 'string', default: '300' },
      'request-ttl-seconds': { type: 'string', default: '600' },
    },
    strict: true,
  });
  const leaderElect = values['leader-elect'];
  if (leaderElect !== 'true' && leaderElect !== 'false') throw new Error(`--leader-elect must be true or false, got ${JSON.stringify(leaderElect)}`);
  const deadline = positiveInt('request-deadline-seconds', values['request-deadline-seconds']);
  if (deadline < 3) throw new Error('--request-deadline-seconds must be at least 3');
  return {
    kubeconfig: values.kubeconfig ?? env.KUBECONFIG,
    metricsPort: positiveInt('metrics-port', values['metrics-port']),
    workers: positiveInt('workers', values.workers),
    resyncSeconds: positiveInt('resync-seconds', values['resync-seconds']),
    leaderElect: leaderElect === 'true',
    leaseNamespace: values['lease-namespace'] ?? env.POD_NAMESPACE ?? 'sidecar-terminator',
    leaseName: values['lease-name'],
    requestDeadlineSeconds: deadline,
    requestTTLSeconds: positiveInt('request-ttl-seconds', values['request-ttl-seconds']),
  };
}
