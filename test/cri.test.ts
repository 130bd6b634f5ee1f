// ContainerRuntime over CRI against a real, private containerd.
import { containerdFixture } from './support/fixtures.ts';
import { runtimeContract } from './support/contract.ts';

runtimeContract('CriRuntime against containerd', containerdFixture);
