// The node agent: watches its node's Pods and active requests, and carries the requests out.
import type { V1Pod } from '@kubernetes/client-node';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { LABEL_ACTIVE, LABEL_NODE_NAME, podUidIndex, requestPath } from '../api/container-recreate-request.ts';
import { EventRecorder } from '../common/events.ts';
import { UrgentWrites } from '../common/urgent-writes.ts';
import { startHealthServer } from '../common/http.ts';
import { ServerClock } from '../common/kube/server-clock.ts';
import { KubeClient, userAgentFor } from '../common/kube/client.ts';
import { namespacedKey, splitKey } from '../common/informer.ts';
import { VERSION } from '../common/version.ts';
import { reportClusterInfo } from '../common/kube/cluster-info.ts';
import { loadKubeConfig } from '../common/kube/config.ts';
import { podPath } from '../common/kube/paths.ts';
import { createLogger, errorMessage } from '../common/log.ts';
import { WorkQueue } from '../common/queue.ts';
import { ProjectingInformer } from '../common/informer.ts';
import { mayNeedSidecarTermination } from '../rules/classify.ts';
import { keptRequest, REQUEST_PAGE_SIZE } from '../rules/requests.ts';
import type { PodProjection } from '../rules/projection.ts';
import { projectPod } from '../rules/projection.ts';
import { FastPath } from './fast-path/fast-path.ts';
import type { AgentConfig } from './config.ts';
import { createAgentMetrics } from './metrics.ts';
import type { AgentPod } from './pod.ts';
import { projectAgentPod } from './pod.ts';
import { leftoverContainers } from './request-plan.ts';
import { Reconciler } from './reconciler.ts';
import type { RuntimeDiscovery } from './runtime-registry.ts';
import { RuntimeRegistry } from './runtime-registry.ts';

/** What the agent keeps of a Pod on its node: for carrying out requests, and for the sidecar rules (agent/pod.ts says why two). */
interface NodePod {
  pod: AgentPod;
  /** Only for Pods the sidecar rules may concern. */
  termination?: PodProjection;
}

function projectNodePod(pod: V1Pod): NodePod {
  const termination = projectPod(pod);
  return { pod: projectAgentPod(pod), ...(mayNeedSidecarTermination(termination) ? { termination } : {}) };
}

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
  // Exits matter only to the fast path: without it the controller creates every request.
  const runtimes = new RuntimeRegistry(discover, log, {
    onExit: (runtime, id, exitCode, exitedAtMs) => fastPath.containerExited(runtime, id, exitCode, exitedAtMs),
    onSocketGone: restart,
  });

  // Callbacks below run only after start(), when the queue exists.
  const enqueue = (key: string) => queue.add(key);
  const requestSelector = `${LABEL_NODE_NAME}=${config.nodeName},${LABEL_ACTIVE}=true`;
  const requests = new ProjectingInformer<ContainerRecreateRequest, ContainerRecreateRequest>({
    client,
    path: requestPath(),
    labelSelector: requestSelector,
    project: keptRequest,
    pageSize: REQUEST_PAGE_SIZE,
    indexBy: podUidIndex,
    onChange: (_key, r) => {
      if (!r?.spec?.podName) return;
      reconciler.noticed(r);
      enqueue(namespacedKey(r.metadata.namespace!, r.spec.podName));
    },
    onRestart: () => metrics.watchRestarts.inc({ resource: 'containerrecreaterequests' }),
    log,
  });
  const hasRequests = (namespace: string, name: string) => requests.list(namespace).some((r) => r.spec?.podName === name);
  const podSelector = `spec.nodeName=${config.nodeName}`;
  // Only compact projections of each Pod on this node are kept.
  const pods = new ProjectingInformer<V1Pod, NodePod>({
    client,
    path: podPath(),
    fieldSelector: podSelector,
    project: projectNodePod,
    // Container IDs as kubelet reported them: a runtime exit event leads straight to its Pod.
    indexBy: (cached) => cached.pod.statuses.flatMap((s) => (s.containerID ? [s.containerID] : [])),
    onChange: (key, cached) => {
      const [namespace, name] = splitKey(key);
      if (cached) fastPath.podChanged(namespace, name, cached.termination);
      else fastPath.podGone(namespace, name);
      if (hasRequests(namespace, name) || (cached && leftoverContainers(cached.pod).length > 0)) enqueue(key);
    },
    onRestart: () => metrics.watchRestarts.inc({ resource: 'pods' }),
    log,
  });

  const creates = new UrgentWrites();
  const events = new EventRecorder(client, 'sidecar-terminator-agent', log, config.nodeName, creates);
  const reconciler = new Reconciler({
    nodeName: config.nodeName,
    client,
    cachedPod: (namespace, name) => pods.get(namespacedKey(namespace, name))?.pod,
    cachedRequests: (namespace) => requests.list(namespace),
    forContainer: (containerID) => runtimes.forContainer(containerID),
    events,
    metrics,
    log,
    requeue: enqueue,
    httpHooks: config.prestopHttpHooks,
    statusWrites: config.workers,
    apiNow: () => apiClock.now(),
  });
  const fastPath = new FastPath({
    client,
    creates,
    nodeName: config.nodeName,
    namespace: config.namespace,
    cache: {
      pod: (namespace, name) => pods.get(namespacedKey(namespace, name))?.termination,
      podOfContainer: (containerID) => pods.byIndex(containerID)[0]?.termination,
      activeRequests: (namespace, podUid) => requests.byIndex(podUid).filter((r) => r.metadata.namespace === namespace),
    },
    runtimes,
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

  const resyncAll = () => {
    const active = requests.list();
    for (const r of active) if (r.spec?.podName) enqueue(namespacedKey(r.metadata.namespace!, r.spec.podName));
    reconciler.forgetAllBut(new Set(active.map((r) => r.metadata.uid!)));
  };
  const resync = setInterval(resyncAll, config.resyncSeconds * 1000);

  const server = await startHealthServer({
    host: config.metricsHost,
    port: config.metricsPort,
    registry: metrics.registry,
    notReadyReason: () => {
      if (!pods.isSynced()) return 'pod watch not synced';
      if (!requests.isSynced()) return 'request watch not synced';
      const notConfined = fastPath.notReadyReason();
      if (notConfined) return notConfined;
      return runtimes.notReadyReason();
    },
    notLiveReason: () => runtimes.notLiveReason(),
  });
  await runtimes.start();
  pods.start();
  requests.start();
  resyncAll();
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
      pods.stop();
      requests.stop();
      runtimes.close();
      await events.flushed();
      await new Promise((resolve) => server.close(resolve));
      log.info('agent stopped');
    },
  };
}
