import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EXIT_BAD_FLAGS, EXIT_FAILED, EXIT_RUNTIME_SOCKET_GONE, exitCodeFor } from './exit-codes.ts';
import { FlagError, boolFlag } from './flags.ts';

/** What `fn` throws. */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('nothing was thrown');
}

describe('exit codes (R51)', () => {
  it('are distinct: 1 a failed start, 2 bad flags (as Go\'s flag package), 3 the agent\'s runtime socket gone', () => {
    assert.deepEqual([EXIT_FAILED, EXIT_BAD_FLAGS, EXIT_RUNTIME_SOCKET_GONE], [1, 2, 3]);
  });
  const cases: [string, unknown, number][] = [
    ['a FlagError', new FlagError('--workers must be a positive whole number'), 2],
    ['a flag check\'s refusal', thrown(() => boolFlag('leader-elect', 'maybe')), 2],
    ['an Error of the start (a kubeconfig, the API server)', new Error('connect ECONNREFUSED'), 1],
    ['an Error caused by a FlagError (not one itself)', new Error('start failed', { cause: new FlagError('x') }), 1],
    ['a thrown string', 'boom', 1],
    ['undefined', undefined, 1],
  ];
  for (const [what, err, code] of cases) it(`${what}: ${code}`, () => assert.equal(exitCodeFor(err), code));
});
