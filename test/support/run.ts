// Runs a command to completion; failures name the command and carry its stderr.
import { execFile } from 'node:child_process';

export interface RunOptions {
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

export function run(cmd: string, args: string[], options: RunOptions = {}): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      {
        timeout: options.timeoutMs ?? 120_000,
        killSignal: 'SIGKILL',
        maxBuffer: 64 * 1024 * 1024,
        env: options.env ?? process.env,
        cwd: options.cwd,
      },
      (error, stdout, stderr) => {
        if (error) {
          const detail = stderr.trim() || stdout.trim() || error.message;
          reject(new Error(`${cmd} ${args.join(' ')} failed: ${detail}`, { cause: error }));
        } else {
          resolve({ stdout, stderr });
        }
      },
    );
  });
}
