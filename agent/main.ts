// The node agent: watches its node's Pods and active requests, and carries the requests out.
import * as k8s from '@kubernetes/client-node';
import type { ContainerRecreateRequest } from '../crr/types.ts';
import { GROUP, LABEL_ACTIVE, LABEL_NODE_NAME, PLURAL, VERSION } from '../crr/types.ts';
import { EventRecorder } from '../common/events.ts';
import { startHealthServer } from '../common/http.ts';
import { loadKubeConfig } from '../common/kubeconfig.ts';
import { createLogger, errorMessage } from '../common/log.ts';
import { WorkQueue } from '../common/queue.ts';
import type { ListPage } from '../common/informer.ts';
import { ProjectingInformer } from '../common/informer.ts';
import type { AgentConfig } from './config.ts';
import { createAgentMetrics } from './metrics.ts';
import type { AgentPod } from './pod.ts';
import { projectAgentPod } from './pod.ts';
import { Reconciler, podKey } from './reconciler.ts';
import type { RuntimeDiscovery } from './runtimes.ts';
import { RuntimeRegistry } from './runtimes.ts';

export interface RunningAgent {
  stop(): Promise<void>;
}

export async function runAgent(config: AgentConfig, discover: RuntimeDiscovery): Promise<RunningAgent> {
  const log = createLogger('agent').child({ node: config.nodeName });
  const kc = loadKubeConfig(config.kubeconfig);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const metrics = createAgentMetrics(() => queue.depth());
  const runtimes = new RuntimeRegistry(discover, log);

  // Callbacks below run only after start(), when the queue exists.
  const enqueue = (key: string) => queue.add(key);
  const requestSelector = `${LABEL_NODE_NAME}=${config.nodeName},${LABEL_ACTIVE}=true`;
  const requests = new ProjectingInformer<ContainerRecreateRequest, ContainerRecreateRequest>({
    kubeConfig: kc,
    path: `/apis/${GROUP}/${VERSION}/${PLURAL}`,
    labelSelector: requestSelector,
    listPage: async (token, limit) => (await custom.listClusterCustomObject({
      group: GROUP, version: VERSION, plural: PLURAL, labelSelector: requestSelector, limit, _continue: token,
    })) as ListPage<ContainerRecreateRequest>,
    project: (r) => r,
    onChange: (_key, r) => r?.spec?.podName && enqueue(podKey(r.metadata.namespace!, r.spec.podName)),
    onRestart: () => metrics.watchRestarts.inc({ resource: 'containerrecreaterequests' }),
    log,
  });
  const hasRequests = (namespace: string, name: string) => requests.list(namespace).some((r) => r.spec?.podName === name);
  const podSelector = `spec.nodeName=${config.nodeName}`;
  // Only the compact AgentPod of each Pod on this node is kept.
  const pods = new ProjectingInformer<k8s.V1Pod, AgentPod>({
    kubeConfig: kc,
    path: '/api/v1/pods',
    fieldSelector: podSelector,
    listPage: (token, limit) => core.listPodForAllNamespaces({ fieldSelector: podSelector, limit, _continue: token }),
    project: projectAgentPod,
    onChange: (key) => {
      const [namespace, name] = key.split('/') as [string, string];
      if (hasRequests(namespace, name)) enqueue(key);
    },
    onRestart: () => metrics.watchRestarts.inc({ resource: 'pods' }),
    log,
  });

  const reconciler = new Reconciler({
    nodeName: config.nodeName,
    core,
    custom,
    cachedPod: (namespace, name) => pods.get(`${namespace}/${name}`),
    cachedRequests: (namespace) => requests.list(namespace),
    runtimeFor: (prefix) => runtimes.runtimeFor(prefix),
    events: new EventRecorder(core, 'sidecar-terminator-agent', log, config.nodeName),
    metrics,
    log,
    requeue: enqueue,
  });
  const queue: WorkQueue = new WorkQueue({
    workers: config.workers,
    handler: (key) => reconciler.reconcile(key),
    onError: (key, err, retryInMs) => log.warn('reconcile failed, retrying', { pod: key, error: errorMessage(err), retryInMs }),
  });

  const resyncAll = () => {
    const active = requests.list();
    for (const r of active) if (r.spec?.podName) enqueue(podKey(r.metadata.namespace!, r.spec.podName));
    reconciler.forgetAllBut(new Set(active.map((r) => r.metadata.uid!)));
  };
  const resync = setInterval(resyncAll, config.resyncSeconds * 1000);

  const server = await startHealthServer({
    port: config.metricsPort,
    registry: metrics.registry,
    notReadyReason: () => {
      if (!pods.isSynced()) return 'pod watch not synced';
      if (!requests.isSynced()) return 'request watch not synced';
      return runtimes.notReadyReason();
    },
  });
  await runtimes.start();
  pods.start();
  requests.start();
  resyncAll();
  log.info('agent started', { metricsPort: config.metricsPort, runtimes: runtimes.prefixes() });

  return {
    async stop() {
      clearInterval(resync);
      queue.stop();
      pods.stop();
      requests.stop();
      runtimes.close();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
