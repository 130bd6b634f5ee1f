// The node agent: watches its node's Pods and active requests, and carries the requests out.
import { EventRecorder } from '../common/events.ts';
import { UrgentWrites } from '../common/urgent-writes.ts';
import { startHealthServer } from '../common/http.ts';
import { ServerClock } from '../common/kube/server-clock.ts';
import { KubeClient, userAgentFor } from '../common/kube/client.ts';
import { VERSION } from '../common/version.ts';
import { reportClusterInfo } from '../common/kube/cluster-info.ts';
import { loadKubeConfig } from '../common/kube/config.ts';
import { containerIDOf } from '../api/container-id.ts';
import { createLogger, errorMessage } from '../common/log.ts';
import { WorkQueue } from '../common/queue.ts';
import { FastPath } from './fast-path/fast-path.ts';
import type { AgentConfig } from './config.ts';
import { createAgentMetrics } from './metrics.ts';
import { NodeCache } from './node-cache.ts';
import { Reconciler } from './reconciler.ts';
import type { RuntimeDiscovery } from './runtime-registry.ts';
import { RuntimeRegistry } from './runtime-registry.ts';

export interface RunningAgent {
  stop(): Promise<void>;
}

/**
 * How long a stopping agent waits for the stops it began (hook, StopContainer, the status write
 * after): below main.ts's AGENT_SHUTDOWN_TIMEOUT_MS, leaving time to flush events and close.
 */
export const STOP_DRAIN_MS = 20_000;

/**
 * `restart`: asks the process to stop as on SIGTERM and exit for kubelet to start the agent again
 * (a runtime socket gone: only a new container gets a fresh mount of it).
 */
export async function runAgent(config: AgentConfig, discover: RuntimeDiscovery, restart: (reason: string) => void = () => {}): Promise<RunningAgent> {
  const log = createLogger('agent', config.logLevel, config.logFormat).child({ node: config.nodeName });
  for (const line of config.deprecations) log.warn(line);
  const metrics = createAgentMetrics();
  // Request deadlines count from the API server's timestamps: measured on its clock.
  const apiClock = new ServerClock();
  const client = new KubeClient(loadKubeConfig(config.kubeconfig), {
    userAgent: userAgentFor('agent', VERSION),
    ...metrics.apiClient,
    rateLimit: { qps: config.kubeApiQps, burst: config.kubeApiBurst },
    clock: apiClock,
  });
  // Exits drive the fast path (without it the controller creates every request), and tell the
  // Reconciler that a container its stop left "running" in the runtime's status has exited (R40).
  const runtimes = new RuntimeRegistry(discover, log, {
    onExit: (runtime, id, exitCode, exitedAtMs) => {
      reconciler.containerExited(containerIDOf(runtime.idPrefix, id));
      fastPath.containerExited(runtime, id, exitCode, exitedAtMs);
    },
    onSocketGone: restart,
  });

  const cache = new NodeCache({ client, nodeName: config.nodeName, metrics, log });
  const creates = new UrgentWrites();
  const events = new EventRecorder(client, 'sidecar-terminator-agent', log, { host: config.nodeName, urgent: creates });
  const reconciler = new Reconciler({
    nodeName: config.nodeName,
    client,
    cache,
    forContainer: (containerID) => runtimes.forContainer(containerID),
    events,
    metrics,
    log,
    // Called only after start(), when the queue exists.
    requeue: (key) => queue.add(key),
    httpHooks: config.prestopHttpHooks,
    statusWrites: config.workers,
    apiNow: () => apiClock.now(),
  });
  const fastPath = new FastPath({
    client,
    creates,
    nodeName: config.nodeName,
    namespace: config.namespace,
    cache,
    runtimes,
    stopFirst: (first) => reconciler.stopFirst(first),
    handOff: (handoff) => reconciler.adopt(handoff),
    events,
    metrics,
    log,
    workers: config.workers,
    requestOptions: { activeDeadlineSeconds: config.requestDeadlineSeconds, ttlSecondsAfterFinished: config.requestTTLSeconds },
  });
  const queue: WorkQueue = new WorkQueue({
    workers: config.workers,
    handler: (key, worker) => reconciler.reconcile(key, worker),
    observe: metrics.workQueue('pods'),
    onError: (key, err, retryInMs) => log.warn('reconcile failed, retrying', { pod: key, error: errorMessage(err), retryInMs }),
  });

  // The fast path hears of a Pod before the Reconciler, as it always did.
  cache.onPodChange.add((namespace, name, cached) => fastPath.podChanged(namespace, name, cached.termination));
  cache.onPodGone.add((namespace, name) => fastPath.podGone(namespace, name));
  cache.onPodChange.add((namespace, name, cached) => reconciler.podChanged(namespace, name, cached.pod));
  cache.onPodGone.add((namespace, name) => reconciler.podChanged(namespace, name, undefined));
  cache.onRequestChange.add((request) => reconciler.requestChanged(request));

  const resync = setInterval(() => reconciler.resync(), config.resyncSeconds * 1000);

  const server = await startHealthServer({
    host: config.metricsHost,
    port: config.metricsPort,
    registry: metrics.registry,
    notReadyReason: () => {
      const notSynced = cache.notReadyReason();
      if (notSynced) return notSynced;
      const notConfined = fastPath.notReadyReason();
      if (notConfined) return notConfined;
      return runtimes.notReadyReason();
    },
    notLiveReason: () => runtimes.notLiveReason(),
  });
  await runtimes.start();
  cache.start();
  reconciler.resync();
  void reportClusterInfo(client, metrics.registry, log);
  void fastPath.start().catch((err: unknown) => log.warn('fast path check failed', { error: errorMessage(err) }));
  log.info('agent started', { metricsPort: config.metricsPort, runtimes: runtimes.prefixes() });

  return {
    async stop() {
      // No new work; what was begun is finished (a stop cut short is resumed by the next agent).
      clearInterval(resync);
      fastPath.stop();
      queue.stop();
      const inFlight = reconciler.stopsInFlight();
      if (inFlight > 0) log.info('stopping: waiting for the container stops under way', { stops: inFlight, maxMs: STOP_DRAIN_MS });
      const drained = await reconciler.drain(STOP_DRAIN_MS);
      if (!drained) log.warn('stopping with container stops still under way: the next agent resumes them', { stops: reconciler.stopsInFlight() });
      cache.stop();
      runtimes.close();
      await events.flushed();
      await new Promise((resolve) => server.close(resolve));
      log.info('agent stopped');
    },
  };
}
