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
import { WatchCache } from '../common/watch-cache.ts';
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
  let queue: WorkQueue | undefined;
  const keyOf = (r: ContainerRecreateRequest) => `${r.metadata.namespace}/${r.metadata.name}`;
  const cache: WatchCache<ContainerRecreateRequest> = new WatchCache<ContainerRecreateRequest>({
    kubeConfig: kc,
    path: `/apis/${GROUP}/${VERSION}/${PLURAL}`,
    list: async () => (await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL })) as { items: ContainerRecreateRequest[] },
    log,
    onChange: (r, event) => event !== 'delete' && queue?.add(keyOf(r)),
    onRestart: () => metrics.watchRestarts.inc({ resource: 'containerrecreaterequests' }),
  });
  const controller = new RequestsController({
    core, custom, log,
    cachedRequest: (namespace, name) => cache.get(name, namespace),
    onAction: (action) => metrics.requestActions.inc({ action }),
  });
  queue = new WorkQueue({
    workers: config.workers,
    handler: (key) => controller.reconcile(key),
    onError: (key, err, retryInMs) => log.warn('request reconcile failed, retrying', { request: key, error: errorMessage(err), retryInMs }),
  });
  const resync = setInterval(() => {
    for (const r of cache.list()) queue?.add(keyOf(r));
  }, config.resyncSeconds * 1000);
  void cache.start();
  return {
    synced: () => cache.isSynced(),
    stop: () => {
      clearInterval(resync);
      queue?.stop();
      cache.stop();
    },
  };
}
