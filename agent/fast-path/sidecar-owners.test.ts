// The sidecars' kubelet labels read ahead (agent/fast-path/sidecar-owners.ts), against a fake runtime.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger } from '../../common/log.ts';
import { main, makePod, sidecar, UID } from '../../test/support/pods.ts';
import { projectPod } from '../../rules/projection.ts';
import type { ContainerOwner, RuntimeContainer } from '../runtime/types.ts';
import { fakeRuntime } from '../../test/support/fake-runtime.ts';
import type { RuntimeContainerID } from '../../api/container-id.ts';
import { containerIDOf, runtimeContainerID } from '../../api/container-id.ts';
import { DiscoveredRuntimes } from '../runtime/discover.ts';
import { SidecarOwners } from './sidecar-owners.ts';

const KEY = 'ns/job-pod';
const OWNER: ContainerOwner = { podUid: UID, podNamespace: 'ns', podName: 'job-pod', container: 'proxy' };
const podWith = (proxyID: string) => projectPod(makePod({ containers: [main('main'), sidecar('proxy', 'running', [], { id: proxyID })] }));

function harness(answer: (id: RuntimeContainerID) => RuntimeContainer | undefined = (id) => ({ id, state: 'running', startedAtNs: 1n, finishedAtNs: 0n, owner: OWNER })) {
  const asked: string[] = [];
  let release = () => {};
  let held: Promise<void> = Promise.resolve();
  const runtime = fakeRuntime({
    status: async (id) => {
      asked.push(id);
      await held;
      return answer(id);
    },
  });
  const owners = new SidecarOwners(new DiscoveredRuntimes([runtime]), createLogger('test', 'error'));
  const hold = () => {
    held = new Promise((resolve) => {
      release = resolve;
    });
  };
  return { owners, asked, hold, release: () => release() };
}

const settle = () => new Promise((r) => setTimeout(r, 5));

describe('SidecarOwners (R37)', () => {
  it('reads the sidecar\'s labels once (not the main\'s), and forgets them with the Pod', async () => {
    const h = harness();
    h.owners.podChanged(KEY, podWith('containerd://p1'));
    h.owners.podChanged(KEY, podWith('containerd://p1'));
    await settle();
    assert.deepEqual(h.asked, ['p1']);
    assert.deepEqual(h.owners.ownerOf(containerIDOf('containerd', runtimeContainerID('p1'))), OWNER);
    h.owners.podChanged(KEY, undefined);
    assert.equal(h.owners.ownerOf(containerIDOf('containerd', runtimeContainerID('p1'))), undefined);
  });

  it('a new container ID in the status (restarted): the old one forgotten, the new one read', async () => {
    const h = harness();
    h.owners.podChanged(KEY, podWith('containerd://p1'));
    await settle();
    h.owners.podChanged(KEY, podWith('containerd://p2'));
    await settle();
    assert.deepEqual(h.asked, ['p1', 'p2']);
    assert.equal(h.owners.ownerOf(containerIDOf('containerd', runtimeContainerID('p1'))), undefined);
    assert.deepEqual(h.owners.ownerOf(containerIDOf('containerd', runtimeContainerID('p2'))), OWNER);
  });

  it('keeps nothing the runtime did not say of that very container: no labels, another ID, no answer, an error', async () => {
    const answers: ((id: RuntimeContainerID) => RuntimeContainer | undefined)[] = [
      (id) => ({ id, state: 'running', startedAtNs: 1n, finishedAtNs: 0n }),
      () => ({ id: runtimeContainerID('other'), state: 'running', startedAtNs: 1n, finishedAtNs: 0n, owner: OWNER }),
      () => undefined,
      () => { throw new Error('runtime down'); },
    ];
    for (const answer of answers) {
      const h = harness(answer);
      h.owners.podChanged(KEY, podWith('containerd://p1'));
      await settle();
      assert.equal(h.owners.ownerOf(containerIDOf('containerd', runtimeContainerID('p1'))), undefined);
    }
  });

  it('an answer that comes after the Pod left is not kept', async () => {
    const h = harness();
    h.hold();
    h.owners.podChanged(KEY, podWith('containerd://p1'));
    h.owners.podChanged(KEY, undefined);
    h.release();
    await settle();
    assert.equal(h.owners.ownerOf(containerIDOf('containerd', runtimeContainerID('p1'))), undefined);
  });

  it('a container ID of a runtime the node does not have, or malformed: not asked', async () => {
    const h = harness();
    h.owners.podChanged(KEY, podWith('cri-o://p1'));
    h.owners.podChanged('ns/other', podWith('nonsense'));
    await settle();
    assert.deepEqual(h.asked, []);
  });
});
