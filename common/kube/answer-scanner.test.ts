import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AnswerScanner, identityFound, identityPaths } from './answer-scanner.ts';

const PATHS = ['type', 'metadata.continue', ...identityPaths('object'), ...identityPaths('items.1')];

function scan(chunks: string[]): { found: Record<string, string>; closed: boolean } {
  const scanner = new AnswerScanner(PATHS);
  for (const c of chunks) scanner.feed(c);
  return { found: Object.fromEntries(scanner.found), closed: scanner.closed };
}

describe('AnswerScanner (R48): who an answer too large to parse is about', () => {
  const event = JSON.stringify({
    type: 'MODIFIED',
    object: {
      metadata: {
        annotations: { a: '<'.repeat(50).replaceAll('<', '\u003c'), name: 'not-this', q: 'say "name": \\', [`${'k'.repeat(5000)}`]: 'x' },
        labels: { 'metadata.name': 'nor-this' },
        name: 'pod-1', namespace: 'ns', resourceVersion: '42', uid: 'u-1',
      },
      spec: { containers: [{ name: 'c', env: [{ name: 'E', value: '"}]\\' }] }], n: 5, t: true, z: null },
    },
  }).replaceAll('<', '\\u003c');

  it('finds the values at the paths asked, at any field order, through escapes and keys nobody asked for', () => {
    const { found, closed } = scan([event]);
    assert.deepEqual(found, { type: 'MODIFIED', 'object.metadata.name': 'pod-1', 'object.metadata.namespace': 'ns', 'object.metadata.resourceVersion': '42', 'object.metadata.uid': 'u-1' });
    assert.ok(closed);
  });

  it('finds the same wherever the chunks are cut: in an escape, between backslashes, in a key', () => {
    const whole = scan([event]).found;
    for (let at = 1; at < event.length; at += 7) assert.deepEqual(scan([event.slice(0, at), event.slice(at)]).found, whole, `cut at ${at}`);
    assert.deepEqual(scan([...event]).found, whole, 'one character at a time');
  });

  it('counts array elements, keeps no value longer than any name, and says when an answer is cut off', () => {
    const list = JSON.stringify({ items: [{ metadata: { name: 'first' } }, { metadata: { name: 'second', uid: 'x'.repeat(5000) } }], metadata: { continue: 'tok' } });
    const { found, closed } = scan([list]);
    assert.deepEqual(found, { 'items.1.metadata.name': 'second', 'metadata.continue': 'tok' });
    assert.deepEqual(identityFound(new Map(Object.entries(found)), 'items.1'), { name: 'second' });
    assert.ok(closed);
    assert.equal(scan([list.slice(0, 40)]).closed, false);
  });
});
