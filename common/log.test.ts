import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import winston from 'winston';
import type { LogFormat } from './flags.ts';
import { createLogger } from './log.ts';

/** The lines a logger of createLogger's writes, for `log` to call it. */
function lines(format: LogFormat, log: (logger: winston.Logger) => void): string[] {
  const stream = new PassThrough();
  const logger = createLogger('agent', 'info', format);
  logger.clear().add(new winston.transports.Stream({ stream }));
  log(logger.child({ node: 'n1' }));
  return String(stream.read() ?? '').split('\n').filter((l) => l !== '');
}

const TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z /;

describe('--log-format (R51)', () => {
  it('json: one object a line, with the timestamp, the component and every field', () => {
    const [line, ...rest] = lines('json', (l) => l.info('agent started', { metricsPort: 9440 }));
    assert.deepEqual(rest, []);
    const entry = JSON.parse(line!) as Record<string, unknown>;
    assert.match(`${String(entry.timestamp)} `, TIME);
    assert.deepEqual({ ...entry, timestamp: undefined }, { level: 'info', message: 'agent started', component: 'agent', node: 'n1', metricsPort: 9440, timestamp: undefined });
  });

  const text: [string, (l: winston.Logger) => void, string][] = [
    ['fields as key=value', (l) => l.info('agent started', { metricsPort: 9440, runtimes: ['containerd'] }),
      'INFO  agent started node=n1 component=agent metricsPort=9440 runtimes=["containerd"]'],
    ['a value with a space or a quote, quoted', (l) => l.warn('reconcile failed, retrying', { error: 'pods "p" not found', pod: 'ns/p' }),
      'WARN  reconcile failed, retrying node=n1 component=agent error="pods \\"p\\" not found" pod=ns/p'],
    ['a message with a line break, quoted: one entry, one line', (l) => l.error('two\nlines'), 'ERROR "two\\nlines" node=n1 component=agent'],
    ['below the level: nothing', (l) => l.debug('hidden'), ''],
  ];
  for (const [what, log, want] of text) {
    it(`text: ${what}`, () => {
      const got = lines('text', log);
      if (want === '') return assert.deepEqual(got, []);
      assert.equal(got.length, 1, got.join('\n'));
      assert.match(got[0]!, TIME);
      assert.equal(got[0]!.replace(TIME, ''), want);
    });
  }
});
