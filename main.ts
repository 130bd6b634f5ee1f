// sidecar-terminator: one program, two roles. `agent` runs on every node (DaemonSet);
// `controller` runs in the cluster (Deployment).
import { parseAgentConfig } from './agent/config.ts';
import { STOP_DRAIN_MS, runAgent } from './agent/main.ts';
import { discoverRuntimes } from './agent/runtime/discover.ts';
import { parseControllerConfig } from './crr/config.ts';
import { runController } from './crr/main.ts';
import { InfoRequested, parseFlags } from './common/flags.ts';

/**
 * The agent finishes the container stops it began (up to STOP_DRAIN_MS), then flushes its events and
 * closes: 25 s, below the DaemonSet's terminationGracePeriodSeconds (30), so that kubelet's SIGKILL
 * never cuts it short. The controller only stops its loops and releases its Lease.
 */
const AGENT_SHUTDOWN_TIMEOUT_MS = STOP_DRAIN_MS + 5_000;
const CONTROLLER_SHUTDOWN_TIMEOUT_MS = 5_000;
const USAGE = `usage: sidecar-terminator agent|controller [flags]
  agent        the node agent (a DaemonSet): stops the sidecars of its node's Job Pods
  controller   the cluster controller (a Deployment): requests, their lifecycle, Pod phases
  --help, -h   print this and exit (\`sidecar-terminator agent --help\`: the flags of each)
  --version    print the version and exit`;

async function main(argv: string[]): Promise<void> {
  const [role, ...args] = argv;
  let stop: () => Promise<void>;
  let shutdownTimeoutMs: number;
  if (role === 'agent') {
    const config = parseAgentConfig(args, process.env);
    const agent = await runAgent(config, () => discoverRuntimes({ hostRunDir: config.hostRunDir, socket: config.runtimeSocket }));
    stop = agent.stop;
    shutdownTimeoutMs = AGENT_SHUTDOWN_TIMEOUT_MS;
  } else if (role === 'controller') {
    stop = (await runController(parseControllerConfig(args, process.env))).stop;
    shutdownTimeoutMs = CONTROLLER_SHUTDOWN_TIMEOUT_MS;
  } else {
    // `sidecar-terminator --help` or `--version` (InfoRequested); anything else is not a role.
    if (role?.startsWith('-')) parseFlags(USAGE, { args: argv, options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean' } } });
    throw new Error(role === undefined ? USAGE : `unknown role ${JSON.stringify(role)}\n${USAGE}`);
  }
  let stopping = false;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      // A second signal (Ctrl-C twice) exits at once.
      if (stopping) process.exit(1);
      stopping = true;
      // The agent finishes its stops, a leader releases its Lease; never let a slow API hold the exit up for long.
      setTimeout(() => process.exit(0), shutdownTimeoutMs).unref();
      stop().finally(() => process.exit(0));
    });
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  // --help and --version: asked for, on stdout, exit 0; anything else is an error.
  if (err instanceof InfoRequested) {
    process.stdout.write(`${err.message}\n`, () => process.exit(0));
    return;
  }
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(2);
});
