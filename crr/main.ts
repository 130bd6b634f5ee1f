// The cluster controller: ContainerRecreateRequest admission and lifecycle, and the Job sidecar
// terminator. Several replicas may run; only the Lease holder acts.
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
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
import { GROUP, PLURAL, VERSION } from './types.ts';

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
    loops = [startRequestsLoop(kc, config, metrics, log)];
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

function startRequestsLoop(kc: k8s.KubeConfig, config: ControllerConfig, metrics: ControllerMetrics, log: Logger): Loop {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const cache = new ProjectingInformer<ContainerRecreateRequest, ContainerRecreateRequest>({
    kubeConfig: kc,
    path: `/apis/${GROUP}/${VERSION}/${PLURAL}`,
    listPage: async (token, limit) => (await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, limit, _continue: token })) as ListPage<ContainerRecreateRequest>,
    project: (r) => r,
    onChange: (key, r) => r && queue.add(key),
    onRestart: () => metrics.watchRestarts.inc({ resource: 'containerrecreaterequests' }),
    log,
  });
  const controller = new RequestsController({
    core, custom, log,
    cachedRequest: (namespace, name) => cache.get(`${namespace}/${name}`),
    onAction: (action) => metrics.requestActions.inc({ action }),
  });
  const queue: WorkQueue = new WorkQueue({
    workers: config.workers,
    handler: (key) => controller.reconcile(key),
    onError: (key, err, retryInMs) => log.warn('request reconcile failed, retrying', { request: key, error: errorMessage(err), retryInMs }),
  });
  const resync = setInterval(() => {
    for (const key of cache.keys()) queue.add(key);
  }, config.resyncSeconds * 1000);
  cache.start();
  return {
    synced: () => cache.isSynced(),
    stop: () => {
      clearInterval(resync);
      queue.stop();
      cache.stop();
    },
  };
}
