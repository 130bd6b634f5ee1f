// Both programs' --request-ttl-seconds (R12) is above the longest retry delay (R14): the attempts,
// and so the backoff, are counted from the requests still there. A TTL that is not is a bad flag,
// refused at start-up with the reason (exit 2), not a comment in rules/requests.ts.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseAgentConfig } from '../agent/config.ts';
import { parseControllerConfig } from '../crr/config.ts';
import { EXIT_BAD_FLAGS, exitCodeFor } from '../common/exit-codes.ts';
import { DEFAULT_OPTIONS, MIN_REQUEST_TTL_SECONDS } from '../rules/requests.ts';

const PROGRAMS = {
  agent: (argv: string[]) => parseAgentConfig(argv, { NODE_NAME: 'n1' }).requestTTLSeconds,
  controller: (argv: string[]) => parseControllerConfig(argv, {}).requestTTLSeconds,
};

/** undefined: refused. */
const CASES: { ttl: string; taken: number | undefined }[] = [
  { ttl: '1', taken: undefined },
  { ttl: '120', taken: undefined },
  { ttl: String(DEFAULT_OPTIONS.retryMaxDelaySeconds), taken: undefined },
  { ttl: String(DEFAULT_OPTIONS.retryMaxDelaySeconds + 1), taken: DEFAULT_OPTIONS.retryMaxDelaySeconds + 1 },
  { ttl: '600', taken: 600 },
  { ttl: '604800', taken: 604_800 },
];

describe('R12, R14: the requests\' TTL is above the longest retry delay, or the flag is refused', () => {
  it('the floor is one second above the retry maximum', () => {
    assert.equal(MIN_REQUEST_TTL_SECONDS, DEFAULT_OPTIONS.retryMaxDelaySeconds + 1);
    assert.ok(DEFAULT_OPTIONS.ttlSecondsAfterFinished >= MIN_REQUEST_TTL_SECONDS, 'the default keeps the rule');
  });

  for (const [program, parse] of Object.entries(PROGRAMS)) {
    for (const { ttl, taken } of CASES) {
      it(`${program} --request-ttl-seconds=${ttl}: ${taken === undefined ? 'refused, exit 2' : 'taken'}`, () => {
        const argv = [`--request-ttl-seconds=${ttl}`];
        if (taken !== undefined) {
          assert.equal(parse(argv), taken);
          return;
        }
        assert.throws(() => parse(argv), (err: unknown) => {
          assert.equal(exitCodeFor(err), EXIT_BAD_FLAGS);
          assert.match((err as Error).message, /^--request-ttl-seconds must be a whole number from 301 to 604800, got "\d+"; a request must outlive the longest retry delay \(300 s\), as retries are counted from the requests still there$/);
          return true;
        });
      });
    }
  }
});
