// ContainerRuntime over CRI against a real, private containerd: Debian's 1.6 and containerd 2.
import { containerd2 } from './support/containerd.ts';
import { containerdFixture } from './support/fixtures.ts';
import { runtimeContract } from './support/contract.ts';

runtimeContract('CriRuntime against Debian\'s containerd 1.6', () => containerdFixture());
runtimeContract('CriRuntime against containerd 2 (e2e/cluster/versions.env)', () => containerdFixture(containerd2()));
