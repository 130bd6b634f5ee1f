// sidecar-terminator: one program, two roles. `agent` runs on every node (DaemonSet);
// `controller` runs in the cluster (Deployment).
import { parseAgentConfig } from './agent/config.ts';
import { runAgent } from './agent/main.ts';
import { discoverRuntimes } from './agent/runtime/discover.ts';
import { parseControllerConfig } from './crr/config.ts';
import { runController } from './crr/main.ts';

const SHUTDOWN_TIMEOUT_MS = 5_000;
const USAGE = 'usage: sidecar-terminator agent|controller [flags] (--help for the flags of each)';

async function main(argv: string[]): Promise<void> {
  const [role, ...args] = argv;
  let stop: () => Promise<void>;
  if (role === 'agent') {
    const config = parseAgentConfig(args, process.env);
    const agent = await runAgent(config, () => discoverRuntimes({ hostRunDir: config.hostRunDir, socket: config.runtimeSocket }));
    stop = agent.stop;
  } else if (role === 'controller') {
    stop = (await runController(parseControllerConfig(args, process.env))).stop;
  } else {
    throw new Error(USAGE);
  }
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      // A leader releases its Lease on the way out; never let a slow API hold the exit up for long.
      setTimeout(() => process.exit(0), SHUTDOWN_TIMEOUT_MS).unref();
      stop().finally(() => process.exit(0));
    });
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(2);
});
