// The demo: on the local cluster, sidecar-terminator deployed from its manifests, a Job whose
// Pod has a main container and a sidecar that never exits by itself; prints what happened.
import { clients } from './support/cluster.ts';
import { container, finishedJob, onlyPod, podEvents, requestsFor, runJob, SIDECAR_MARK, stopOnTerm, timeline } from './support/jobs.ts';
import { deployProject } from './support/deploy.ts';

const NAMESPACE = 'demo';

async function main(): Promise<void> {
  const { core } = clients();
  console.log('demo: deploying sidecar-terminator with kubectl apply -k (image built offline)');
  await deployProject();
  await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  console.log('demo: Job "report": main container runs 3 s; sidecar "log-shipper" loops forever (KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true)');
  await runJob(NAMESPACE, 'report', {
    restartPolicy: 'Never',
    containers: [container('main', 'echo working; sleep 3; echo done'), container('log-shipper', stopOnTerm(0), { env: [SIDECAR_MARK] })],
  });
  const { job, type } = await finishedJob(NAMESPACE, 'report');
  const pod = await onlyPod(NAMESPACE, 'report');
  const [request] = await requestsFor(pod);
  console.log(`demo: Job ${type}`);
  console.log(`demo: ${timeline('timeline', job, pod, 'main', 'log-shipper', request)}`);
  if (request) {
    const state = request.status?.containerRecreateStates?.[0];
    console.log(`demo: ContainerRecreateRequest ${request.metadata.name}: ${request.status?.phase}, ${state?.name} ${state?.phase} (exit code ${state?.exitCode})`);
  }
  for (const e of await podEvents(pod)) console.log(`demo: event ${e}`);
  if (type !== 'Complete') process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(`demo failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
