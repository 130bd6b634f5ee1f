// The agent's configuration: flags, with NODE_NAME and POD_NAMESPACE from the environment (the
// downward API).
import { MAX_ACTIVE_DEADLINE_SECONDS, MAX_TTL_SECONDS_AFTER_FINISHED, MIN_ACTIVE_DEADLINE_SECONDS } from '../api/container-recreate-request.ts';
import { DEFAULT_OPTIONS, MIN_REQUEST_TTL_SECONDS, REQUEST_TTL_FLOOR } from '../rules/requests.ts';
import { type ApiRateConfig, apiRateFlags } from '../common/api-rate-flags.ts';
import {
  COMMON_OPTIONS, COMMON_USAGE, FlagError, type LogFormat, type LogLevel, METRICS_PORT_RENAMED, type RenamedFlag,
  bareBoolFlags, bindAddress, boolFlag, intInRange, logFormat, logLevel, parseFlags, positiveInt,
} from '../common/flags.ts';

export interface AgentConfig extends ApiRateConfig {
  nodeName: string;
  /** The agent's own namespace (env POD_NAMESPACE), where its start-up checks address dry-run requests. */
  namespace: string;
  /** Where the host's /var/run is mounted; runtime sockets are looked for under it. */
  hostRunDir: string;
  /** A runtime socket named explicitly, instead of looking for one. */
  runtimeSocket?: string;
  /** Where /metrics, /healthz and /readyz listen (--metrics-bind-address): every interface when undefined. */
  metricsHost: string | undefined;
  metricsPort: number;
  workers: number;
  resyncSeconds: number;
  kubeconfig?: string;
  /** activeDeadlineSeconds of the requests the agent creates itself (on a main container's exit). */
  requestDeadlineSeconds: number;
  /** ttlSecondsAfterFinished of the requests the agent creates itself. */
  requestTTLSeconds: number;
  /** Whether httpGet preStop hooks are run: they are sent from the agent's network position, its own Pod's. */
  prestopHttpHooks: boolean;
  logLevel: LogLevel;
  logFormat: LogFormat;
  /** A line for each former flag name given, logged at start-up. */
  deprecations: string[];
}

const API_RATE = apiRateFlags('agent');

/** The agent's former flag names, taken for one release. */
export const AGENT_RENAMED_FLAGS: readonly RenamedFlag[] = [METRICS_PORT_RENAMED];

const USAGE = `usage: sidecar-terminator agent [flags]
  --node-name NAME                  node this agent serves (default: env NODE_NAME; required)
  --host-run-dir DIR                the host's /var/run as mounted here (default /var/run)
  --runtime-socket PATH             use this CRI or Docker socket instead of looking for one
  --metrics-bind-address ADDR       [HOST]:PORT of /metrics, /healthz, /readyz (default :9440, every interface);
                                    not 0: the probes ask the same port
  --workers N                       Pods processed at once, per queue, and request status writes at once (default 32)
  --resync-seconds N                re-check every active request this often (default 30)
  --kubeconfig PATH                 kubeconfig (default: in-cluster, or env KUBECONFIG)
  --request-deadline-seconds N      activeDeadlineSeconds of the requests it creates when a Pod's main
                                    containers exit (default ${DEFAULT_OPTIONS.activeDeadlineSeconds}, ${MIN_ACTIVE_DEADLINE_SECONDS}..${MAX_ACTIVE_DEADLINE_SECONDS}; as the controller's)
  --request-ttl-seconds N           ttlSecondsAfterFinished of those requests (default ${DEFAULT_OPTIONS.ttlSecondsAfterFinished},
                                    ${MIN_REQUEST_TTL_SECONDS}..${MAX_TTL_SECONDS_AFTER_FINISHED}; as the controller's): ${REQUEST_TTL_FLOOR}
  --prestop-http-hooks=false        do not run httpGet preStop hooks (default true): the agent sends them
                                    from the agent's own Pod, whose network policy is not the target Pod's;
                                    each is reported on its Pod (PreStopHookNotRun) and the stop goes on
${API_RATE.usage}
${COMMON_USAGE}
deprecated, taken until the next release:
  --metrics-port N                  --metrics-bind-address=:N`;

export function parseAgentConfig(argv: string[], env: NodeJS.ProcessEnv): AgentConfig {
  const { values, deprecations } = parseFlags(USAGE, {
    args: bareBoolFlags(argv, ['prestop-http-hooks']),
    options: {
      ...COMMON_OPTIONS,
      'node-name': { type: 'string' },
      'host-run-dir': { type: 'string', default: '/var/run' },
      'runtime-socket': { type: 'string' },
      'metrics-bind-address': { type: 'string', default: ':9440' },
      workers: { type: 'string', default: '32' },
      'resync-seconds': { type: 'string', default: '30' },
      kubeconfig: { type: 'string' },
      'request-deadline-seconds': { type: 'string', default: String(DEFAULT_OPTIONS.activeDeadlineSeconds) },
      'request-ttl-seconds': { type: 'string', default: String(DEFAULT_OPTIONS.ttlSecondsAfterFinished) },
      'prestop-http-hooks': { type: 'string', default: 'true' },
      ...API_RATE.options,
    },
    strict: true,
  }, AGENT_RENAMED_FLAGS);
  const nodeName = values['node-name'] ?? env.NODE_NAME;
  if (!nodeName) throw new FlagError(`the node name is required: set NODE_NAME or --node-name\n${USAGE}`);
  const metrics = bindAddress('metrics-bind-address', values['metrics-bind-address']);
  return {
    nodeName,
    namespace: env.POD_NAMESPACE || 'default',
    hostRunDir: values['host-run-dir'],
    // Empty, as the chart's default: look for one.
    runtimeSocket: values['runtime-socket'] || undefined,
    metricsHost: metrics.host,
    metricsPort: metrics.port,
    workers: positiveInt('workers', values.workers),
    resyncSeconds: positiveInt('resync-seconds', values['resync-seconds']),
    kubeconfig: values.kubeconfig ?? env.KUBECONFIG,
    requestDeadlineSeconds: intInRange('request-deadline-seconds', values['request-deadline-seconds'], MIN_ACTIVE_DEADLINE_SECONDS, MAX_ACTIVE_DEADLINE_SECONDS),
    requestTTLSeconds: intInRange('request-ttl-seconds', values['request-ttl-seconds'], MIN_REQUEST_TTL_SECONDS, MAX_TTL_SECONDS_AFTER_FINISHED, REQUEST_TTL_FLOOR),
    prestopHttpHooks: boolFlag('prestop-http-hooks', values['prestop-http-hooks']),
    ...API_RATE.parse(values),
    logLevel: logLevel(values, env),
    logFormat: logFormat(values['log-format']),
    deprecations,
  };
}
