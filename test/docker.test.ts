// ContainerRuntime over the Docker Engine API against a real, private dockerd.
import { dockerFixture } from './support/fixtures.ts';
import { runtimeContract } from './support/contract.ts';

runtimeContract('DockerRuntime against dockerd', dockerFixture);
