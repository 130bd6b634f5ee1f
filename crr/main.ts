// The cluster controller: ContainerRecreateRequest admission and lifecycle, and the Job sidecar
// terminator. Several replicas may run; only the Lease holder acts.
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { EventRecorder } from '../common/events.ts';
import { UnreadablePodWarnings } from './unreadable-pods.ts';
import { EXIT_FAILED } from '../common/exit-codes.ts';
import { startHealthServer } from '../common/http.ts';
import type { KubeApi } from '../common/kube/api.ts';
import { ServerClock } from '../common/kube/server-clock.ts';
import { KubeClient, userAgentFor } from '../common/kube/client.ts';
import { VERSION } from '../common/version.ts';
import { reportClusterInfo } from '../common/kube/cluster-info.ts';
import { loadKubeConfig } from '../common/kube/config.ts';
import { LeaderElector } from '../common/leader.ts';
import type { Logger } from '../common/log.ts';
import { createLogger, errorMessage } from '../common/log.ts';
import { WorkQueue } from '../common/queue.ts';
import { UrgentWrites } from '../common/urgent-writes.ts';
import { namespacedKey } from '../common/informer.ts';
import type { ControllerConfig } from './config.ts';
import type { ControllerMetrics } from './metrics.ts';
import { createControllerMetrics } from './metrics.ts';
import { RequestsController } from './requests-controller.ts';
import { SidecarController } from './sidecar-controller.ts';
import { ClusterCache } from './cluster-cache.ts';
import { checkSelectors, NodeKinds } from './node-kinds.ts';
import { DEFAULT_OPTIONS } from '../rules/requests.ts';
import { ActedOnLog, invalidPolicies, mostPoliciesInANamespace, POLICY_STATUS_INTERVAL_MS, writePolicyStatuses } from './policy-status.ts';

/** The controller's events that may wait to be sent: a wave's worth, about 20 MiB at most. */
export const CONTROLLER_EVENTS_WAITING = 10_000;

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

  const cache = new ClusterCache({ client, metrics, log });
  const nodes = new NodeKinds({
    client, log,
    agentlessNodeSelector: config.agentlessNodeSelector,
    agentlessAfterSeconds: config.agentlessAfterSeconds,
    agentNamespace: config.agentNamespace,
    agentPodSelector: config.agentPodSelector,
    onRestart: (resource) => metrics.watchRestarts.inc({ resource }),
  });

  // The Pods' events wait for the request creates: at the default cap of 1,000 waiting, a wave of
  // 5,000 finishing Jobs lost most of its events.
  const creates = new UrgentWrites();
  const events = new EventRecorder(client, 'sidecar-terminator', log, { urgent: creates, maxWaiting: CONTROLLER_EVENTS_WAITING });
  const requestsController = new RequestsController({
    client, log, events, now: () => apiClock.now(),
    cachedRequest: (namespace, name) => cache.request(namespace, name),
    onAction: (action) => metrics.requestActions.inc({ action }),
  });
  const actedOn = new ActedOnLog();
  const sidecarController: SidecarController = new SidecarController({
    client, log, metrics, actedOn,
    cachedPod: (key) => cache.pod(key),
    requestsForPod: (namespace, uid) => cache.requestsForPod(namespace, uid),
    withPolicies: (pod) => (cache.policyStore.isSynced() ? cache.policies.apply(pod) : undefined),
    nodeKind: (name) => nodes.kindOf(name),
    events,
    creates,
    options: {
      ...DEFAULT_OPTIONS,
      activeDeadlineSeconds: config.requestDeadlineSeconds,
      ttlSecondsAfterFinished: config.requestTTLSeconds,
      sidecarStartTimeoutSeconds: config.sidecarStartTimeoutSeconds,
      agentlessSwapImages: config.agentlessSwapImages,
      settledPhase: config.settledPhase,
    },
  });
  const requestQueue: WorkQueue = new WorkQueue({
    workers: config.workers, handler: (key) => requestsController.reconcile(key), observe: metrics.workQueue('requests'), onError: onError('request'),
  });
  const podQueue: WorkQueue = new WorkQueue({
    workers: config.workers, handler: (key) => sidecarController.reconcile(key), observe: metrics.workQueue('pods'), onError: onError('pod'),
  });

  cache.onRequestChange.add((key) => requestQueue.add(key));
  cache.onRequestChange.add((_key, r) => podQueue.add(namespacedKey(r.metadata.namespace!, r.spec.podName)));
  cache.onPodChange.add((key) => podQueue.add(key));
  // Gone (deleted, or no longer of interest): what was emitted for it is of no more use.
  cache.onPodGone.add((key) => sidecarController.forget(key));
  const unreadable = new UnreadablePodWarnings(events);
  cache.onPodUnreadable.add((pod) => unreadable.warn(pod));

  let writingStatuses = false;
  const policyStatuses = setInterval(() => {
    if (writingStatuses || !cache.isSynced()) return;
    metrics.namespacePoliciesMax.set(mostPoliciesInANamespace(cache.policyStore.all()));
    for (const [kind, count] of Object.entries(invalidPolicies(cache.policyStore.all()))) metrics.invalidPolicies.set({ kind }, count);
    writingStatuses = true;
    const deps = { client, log, policies: () => cache.policyStore.all(), matchedPods: () => sidecarController.matchedPods(), actedOn };
    void writePolicyStatuses(deps, new Date(apiClock.now()).toISOString()).finally(() => (writingStatuses = false));
  }, POLICY_STATUS_INTERVAL_MS);
  const resync = setInterval(() => {
    for (const key of cache.requestKeys()) requestQueue.addForResync(key);
    for (const key of cache.podKeys()) podQueue.addForResync(key);
  }, config.resyncSeconds * 1000);
  nodes.start();
  cache.start();
  return {
    synced: () => nodes.isSynced() && cache.isSynced(),
    stop: () => {
      clearInterval(resync);
      clearInterval(policyStatuses);
      requestQueue.stop();
      podQueue.stop();
      nodes.stop();
      cache.stop();
    },
  };
}

