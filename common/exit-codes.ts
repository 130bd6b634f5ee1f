// The exit codes of both programs (README, "Exit codes"), apart from 0: asked for --help or
// --version, or stopped by SIGTERM.
import { FlagError } from './flags.ts';

/** It did not start (the API server, the runtime, the kubeconfig...), or stopped on a failure (a lost leadership). */
export const EXIT_FAILED = 1;
/** Bad flags or arguments, as Go's flag package exits: restarting will not help, the Pod spec must change. */
export const EXIT_BAD_FLAGS = 2;
/**
 * The agent exits with this when its runtime's socket is gone (the runtime restarted, or is down),
 * for kubelet to start it again with a fresh mount of the socket.
 */
export const EXIT_RUNTIME_SOCKET_GONE = 3;

/** The exit code for an error that ended the start-up. */
export function exitCodeFor(err: unknown): number {
  return err instanceof FlagError ? EXIT_BAD_FLAGS : EXIT_FAILED;
}
