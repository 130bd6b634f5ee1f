// The cluster controller: ContainerRecreateRequest admission and lifecycle, and the Job sidecar
// terminator. Several replicas may run; only the Lease holder acts.
import { now } from '../common/clock.ts';
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import { EventRecorder } from '../common/events.ts';
import { EXIT_FAILED } from '../common/exit-codes.ts';
import { startHealthServer } from '../common/http.ts';
import type { KubeApi } from '../common/kube/api.ts';
import { ServerClock } from '../common/kube/server-clock.ts';
import { KubeClient, userAgentFor } from '../common/kube/client.ts';
import { VERSION } from '../common/version.ts';
import { reportClusterInfo } from '../common/kube/cluster-info.ts';
import { loadKubeConfig } from '../common/kube/config.ts';
import { podPath } from '../common/kube/paths.ts';
import { LeaderElector } from '../common/leader.ts';
import type { Logger } from '../common/log.ts';
import { createLogger, errorMessage } from '../common/log.ts';
import { WorkQueue } from '../common/queue.ts';
import { namespacedKey, ProjectingInformer } from '../common/informer.ts';
import type { ControllerConfig } from './config.ts';
import type { ControllerMetrics } from './metrics.ts';
import { createControllerMetrics } from './metrics.ts';
import { RequestsController } from './requests-controller.ts';
import type { ContainerRecreateRequest } from '../api/container-recreate-request.ts';
import { requestPath } from '../api/container-recreate-request.ts';
import type { WatchedPod } from './sidecar-controller.ts';
import { SidecarController } from './sidecar-controller.ts';
import { checkSelectors, NodeKinds } from './node-kinds.ts';
import { mayNeedSidecarTermination } from '../rules/classify.ts';
import { mayBeHeldByUnmarkedSidecar } from '../rules/unmarked-sidecars.ts';
import { projectPod } from '../rules/projection.ts';
import { DEFAULT_OPTIONS, keptRequest, REQUEST_PAGE_SIZE, requestPodUids } from '../rules/requests.ts';

export interface RunningController {
  stop(): Promise<void>;
}

interface Loop {
  synced(): boolean;
  stop(): void;
}

export async function runController(config: ControllerConfig): Promise<RunningController> {
  const identity = `${os.hostname()}-${randomBytes(4).toString('hex')}`;
  const log = createLogger('controller', config.logLevel, config.logFormat).child({ identity });
  for (const line of config.deprecations) log.warn(line);
  let loops: Loop[] = [];
  const metrics = createControllerMetrics();
  // Request deadlines count from the API server's timestamps: measured on its clock.
  const apiClock = new ServerClock();
  const client = new KubeClient(loadKubeConfig(config.kubeconfig), {
    userAgent: userAgentFor('controller', VERSION),
    ...metrics.apiClient,
    rateLimit: { qps: config.kubeApiQps, burst: config.kubeApiBurst },
    clock: apiClock,
  });
  await checkSelectors(client, config);

  const lead = () => {
    metrics.isLeader.set(1);
    loops = [startLoops(client, config, metrics, log, apiClock)];
  };
  const elector = config.leaderElect
    ? new LeaderElector({
        client, namespace: config.leaseNamespace, name: config.leaseName, identity, log,
        leaseDurationSeconds: config.leaseDurationSeconds,
        renewDeadlineSeconds: config.renewDeadlineSeconds,
        retryPeriodSeconds: config.retryPeriodSeconds,
        onStartedLeading: lead,
        onStoppedLeading: () => {
          // Another replica may already act: stop at once, and let the Deployment restart us.
          for (const l of loops) l.stop();
          process.exit(EXIT_FAILED);
        },
      })
    : undefined;

  const server = await startHealthServer({
    host: config.metricsHost,
    port: config.metricsPort,
    registry: metrics.registry,
    notReadyReason: () => (loops.some((l) => !l.synced()) ? 'watches not synced yet' : undefined),
  });
  if (elector) elector.start();
  else lead();
  void reportClusterInfo(client, metrics.registry, log);
  log.info('controller started', { leaderElection: config.leaderElect, metricsPort: config.metricsPort });

  return {
    async stop() {
      for (const l of loops) l.stop();
      await elector?.stop();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function startLoops(client: KubeApi, config: ControllerConfig, metrics: ControllerMetrics, log: Logger, apiClock: ServerClock): Loop {
  const onError = (what: string) => (key: string, err: unknown, retryInMs: number) =>
    log.warn(`${what} reconcile failed, retrying`, { key, error: errorMessage(err), retryInMs });

  // Callbacks run only after start(), when both queues exist.
  const requests = new ProjectingInformer<ContainerRecreateRequest, ContainerRecreateRequest>({
    client,
    path: requestPath(),
    project: keptRequest,
    pageSize: REQUEST_PAGE_SIZE,
    // By the uid in the label and in the name: a request that took our name is found whatever its labels.
    indexBy: requestPodUids,
    onChange: (key, r) => {
      if (!r) return;
      requestQueue.add(key);
      podQueue.add(namespacedKey(r.metadata.namespace!, r.spec.podName));
    },
    onRestart: () => metrics.watchRestarts.inc({ resource: 'containerrecreaterequests' }),
    log,
  });
  // Only Pods that may need their sidecars stopped, or be held by a well-known sidecar nobody marked
  // (R52), are kept, and only as a compact projection;
  // the API server already leaves out restartPolicy Always Pods (most of a cluster).
  const podSelector = 'spec.restartPolicy!=Always';
  const pods = new ProjectingInformer<V1Pod, WatchedPod>({
    client,
    path: podPath(),
    fieldSelector: podSelector,
    project: (p) => {
      const pod = projectPod(p);
      return mayNeedSidecarTermination(pod) || mayBeHeldByUnmarkedSidecar(pod) ? { pod, receivedAtMs: now() } : undefined;
    },
    onChange: (key, cached) => {
      // Gone (deleted, or no longer of interest): what was emitted for it is of no more use.
      if (cached) podQueue.add(key);
      else sidecarController.forget(key);
    },
    onRestart: () => metrics.watchRestarts.inc({ resource: 'pods' }),
    log,
  });
  const nodes = new NodeKinds({
    client, log,
    agentlessNodeSelector: config.agentlessNodeSelector,
    agentlessAfterSeconds: config.agentlessAfterSeconds,
    agentNamespace: config.agentNamespace,
    agentPodSelector: config.agentPodSelector,
    onRestart: (resource) => metrics.watchRestarts.inc({ resource }),
  });

  const events = new EventRecorder(client, 'sidecar-terminator', log);
  const requestsController = new RequestsController({
    client, log, events, now: () => apiClock.now(),
    cachedRequest: (namespace, name) => requests.get(namespacedKey(namespace, name)),
    onAction: (action) => metrics.requestActions.inc({ action }),
  });
  const sidecarController: SidecarController = new SidecarController({
    client, log, metrics,
    cachedPod: (key) => pods.get(key),
    requestsForPod: (namespace, uid) => requests.byIndex(uid).filter((r) => r.metadata.namespace === namespace),
    nodeKind: (name) => nodes.kindOf(name),
    events,
    options: {
      ...DEFAULT_OPTIONS,
      activeDeadlineSeconds: config.requestDeadlineSeconds,
      ttlSecondsAfterFinished: config.requestTTLSeconds,
      sidecarStartTimeoutSeconds: config.sidecarStartTimeoutSeconds,
      agentlessSwapImages: config.agentlessSwapImages,
    },
  });
  const requestQueue: WorkQueue = new WorkQueue({
    workers: config.workers, handler: (key) => requestsController.reconcile(key), observe: metrics.workQueue('requests'), onError: onError('request'),
  });
  const podQueue: WorkQueue = new WorkQueue({
    workers: config.workers, handler: (key) => sidecarController.reconcile(key), observe: metrics.workQueue('pods'), onError: onError('pod'),
  });

  const resync = setInterval(() => {
    for (const key of requests.keys()) requestQueue.add(key);
    for (const key of pods.keys()) podQueue.add(key);
  }, config.resyncSeconds * 1000);
  nodes.start();
  requests.start();
  pods.start();
  return {
    synced: () => nodes.isSynced() && requests.isSynced() && pods.isSynced(),
    stop: () => {
      clearInterval(resync);
      requestQueue.stop();
      podQueue.stop();
      for (const informer of [nodes, requests, pods]) informer.stop();
    },
  };
}

