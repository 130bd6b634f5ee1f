// The cluster controller: ContainerRecreateRequest admission and lifecycle, and the Job sidecar
// terminator. Several replicas may run; only the Lease holder acts.
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import { EventRecorder } from '../common/events.ts';
import { startHealthServer } from '../common/http.ts';
import { loadKubeConfig } from '../common/kubeconfig.ts';
import { LeaderElector } from '../common/leader.ts';
import type { Logger } from '../common/log.ts';
import { createLogger, errorMessage } from '../common/log.ts';
import { WorkQueue } from '../common/queue.ts';
import type { ListPage } from '../common/informer.ts';
import { ProjectingInformer } from '../common/informer.ts';
import type { ControllerConfig } from './config.ts';
import type { ControllerMetrics } from './metrics.ts';
import { createControllerMetrics } from './metrics.ts';
import { RequestsController } from './requests-controller.ts';
import type { ContainerRecreateRequest } from './types.ts';
import { GROUP, LABEL_POD_UID, PLURAL, VERSION } from './types.ts';
import type { CachedPod } from './sidecar-controller.ts';
import { SidecarController } from './sidecar-controller.ts';
import type { NodeKind } from './sidecar/classify.ts';
import { mayNeedSidecarTermination } from './sidecar/classify.ts';
import { VIRTUAL_NODE_LABEL_KEY, VIRTUAL_NODE_LABEL_VALUE } from './sidecar/constants.ts';
import { projectPod } from './sidecar/projection.ts';
import { DEFAULT_OPTIONS } from './sidecar/requests.ts';

export interface RunningController {
  stop(): Promise<void>;
}

interface Loop {
  synced(): boolean;
  stop(): void;
}

export async function runController(config: ControllerConfig): Promise<RunningController> {
  const identity = `${os.hostname()}-${randomBytes(4).toString('hex')}`;
  const log = createLogger('controller').child({ identity });
  const kc = loadKubeConfig(config.kubeconfig);
  const metrics = createControllerMetrics();
  let loops: Loop[] = [];

  const lead = () => {
    metrics.isLeader.set(1);
    loops = [startLoops(kc, config, metrics, log)];
  };
  const elector = config.leaderElect
    ? new LeaderElector({
        kubeConfig: kc, namespace: config.leaseNamespace, name: config.leaseName, identity, log,
        onStartedLeading: lead,
        onStoppedLeading: () => {
          // Another replica may already act: stop at once, and let the Deployment restart us.
          for (const l of loops) l.stop();
          process.exit(1);
        },
      })
    : undefined;

  const server = await startHealthServer({
    port: config.metricsPort,
    registry: metrics.registry,
    notReadyReason: () => (loops.some((l) => !l.synced()) ? 'watches not synced yet' : undefined),
  });
  if (elector) elector.start();
  else lead();
  log.info('controller started', { leaderElection: config.leaderElect, metricsPort: config.metricsPort });

  return {
    async stop() {
      for (const l of loops) l.stop();
      await elector?.stop();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function startLoops(kc: k8s.KubeConfig, config: ControllerConfig, metrics: ControllerMetrics, log: Logger): Loop {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const onError = (what: string) => (key: string, err: unknown, retryInMs: number) =>
    log.warn(`${what} reconcile failed, retrying`, { key, error: errorMessage(err), retryInMs });

  // Callbacks run only after start(), when both queues exist.
  const requests = new ProjectingInformer<ContainerRecreateRequest, ContainerRecreateRequest>({
    kubeConfig: kc,
    path: `/apis/${GROUP}/${VERSION}/${PLURAL}`,
    listPage: async (token, limit) => (await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, limit, _continue: token })) as ListPage<ContainerRecreateRequest>,
    project: (r) => r,
    onChange: (key, r) => {
      if (!r) return;
      requestQueue.add(key);
      podQueue.add(`${r.metadata.namespace}/${r.spec.podName}`);
    },
    onRestart: () => metrics.watchRestarts.inc({ resource: 'containerrecreaterequests' }),
    log,
  });
  // Only Pods that may need their sidecars stopped are kept, and only as a compact projection;
  // the API server already leaves out restartPolicy Always Pods (most of a cluster).
  const podSelector = 'spec.restartPolicy!=Always';
  const pods = new ProjectingInformer<k8s.V1Pod, CachedPod>({
    kubeConfig: kc,
    path: '/api/v1/pods',
    fieldSelector: podSelector,
    listPage: (token, limit) => core.listPodForAllNamespaces({ fieldSelector: podSelector, limit, _continue: token }),
    project: (p) => {
      const pod = projectPod(p);
      return mayNeedSidecarTermination(pod) ? { pod, receivedAtMs: Date.now() } : undefined;
    },
    onChange: (key, cached) => {
      if (cached) podQueue.add(key);
    },
    onRestart: () => metrics.watchRestarts.inc({ resource: 'pods' }),
    log,
  });
  const nodes = new ProjectingInformer<k8s.V1Node, NodeKind>({
    kubeConfig: kc,
    path: '/api/v1/nodes',
    listPage: (token, limit) => core.listNode({ limit, _continue: token }),
    project: nodeKindOf,
    onChange: () => {},
    onRestart: () => metrics.watchRestarts.inc({ resource: 'nodes' }),
    log,
  });

  const requestsController = new RequestsController({
    core, custom, log,
    cachedRequest: (namespace, name) => requests.get(`${namespace}/${name}`),
    onAction: (action) => metrics.requestActions.inc({ action }),
  });
  const sidecarController = new SidecarController({
    core, custom, log, metrics,
    cachedPod: (key) => pods.get(key),
    requestsForPod: (namespace, uid) => requests.list(namespace).filter((r) => r.metadata.labels?.[LABEL_POD_UID] === uid),
    nodeKind: async (name) => nodes.get(name) ?? nodeKindOf(await core.readNode({ name })),
    events: new EventRecorder(core, 'sidecar-terminator', log),
    options: { ...DEFAULT_OPTIONS, activeDeadlineSeconds: config.requestDeadlineSeconds, ttlSecondsAfterFinished: config.requestTTLSeconds },
  });
  const requestQueue: WorkQueue = new WorkQueue({ workers: config.workers, handler: (key) => requestsController.reconcile(key), onError: onError('request') });
  const podQueue: WorkQueue = new WorkQueue({ workers: config.workers, handler: (key) => sidecarController.reconcile(key), onError: onError('pod') });

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

function nodeKindOf(node: k8s.V1Node): NodeKind {
  return node.metadata?.labels?.[VIRTUAL_NODE_LABEL_KEY] === VIRTUAL_NODE_LABEL_VALUE ? 'virtual' : 'real';
}
