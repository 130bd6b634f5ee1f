// sidecar-terminator: one program, two roles. `agent` runs on every node (DaemonSet);
// `controller` runs in the cluster (Deployment).
import { parseAgentConfig } from './agent/config.ts';
import { STOP_DRAIN_MS, runAgent } from './agent/main.ts';
import { discoverRuntimes } from './agent/runtime/discover.ts';
import { parseControllerConfig } from './crr/config.ts';
import { runController } from './crr/main.ts';
import { EXIT_RUNTIME_SOCKET_GONE, exitCodeFor } from './common/exit-codes.ts';
import { FlagError, InfoRequested, parseFlags } from './common/flags.ts';

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
  --version    print the version and exit
exit codes: 0 asked to stop (SIGTERM), or --help, --version; 1 failed to start, or stopped on a failure;
  2 bad flags or arguments; 3 the agent's runtime socket is gone (kubelet starts it again with a fresh mount)`;

async function main(argv: string[]): Promise<void> {
  const [role, ...args] = argv;
  let stop: () => Promise<void> = async () => {};
  let shutdownTimeoutMs: number;
  let stopping = false;
  // Stops as on SIGTERM (the agent finishes its stops, a leader releases its Lease), then exits with
  // `code`; never lets a slow API hold the exit up for long.
  const shutdown = (code: number) => {
    stopping = true;
    setTimeout(() => process.exit(code), shutdownTimeoutMs).unref();
    stop().finally(() => process.exit(code));
  };
  if (role === 'agent') {
    const config = parseAgentConfig(args, process.env);
    shutdownTimeoutMs = AGENT_SHUTDOWN_TIMEOUT_MS;
    const agent = await runAgent(config, () => discoverRuntimes({ hostRunDir: config.hostRunDir, socket: config.runtimeSocket }), () => {
      if (!stopping) shutdown(EXIT_RUNTIME_SOCKET_GONE);
    });
    stop = agent.stop;
  } else if (role === 'controller') {
    stop = (await runController(parseControllerConfig(args, process.env))).stop;
    shutdownTimeoutMs = CONTROLLER_SHUTDOWN_TIMEOUT_MS;
  } else {
    // `sidecar-terminator --help` or `--version` (InfoRequested); anything else is not a role.
    if (role?.startsWith('-')) parseFlags(USAGE, { args: argv, options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean' } } });
    throw new FlagError(role === undefined ? USAGE : `unknown role ${JSON.stringify(role)}\n${USAGE}`);
  }
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      // A second signal (Ctrl-C twice) exits at once.
      if (stopping) process.exit(1);
      shutdown(0);
    });
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  // --help and --version: asked for, on stdout, exit 0; anything else is an error (exit-codes.ts).
  if (err instanceof InfoRequested) {
    process.stdout.write(`${err.message}\n`, () => process.exit(0));
    return;
  }
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(exitCodeFor(err));
});
