import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeApiError } from './client.ts';
import { createIfAbsent, ignoreNotFound, isConflict, isNotFound } from './errors.ts';

const apiError = (code: number) => new KubeApiError(code, 'POST', '/x', '');

describe('API errors by name', () => {
  it('isNotFound and isConflict read the status code, and nothing else', () => {
    assert.equal(isNotFound(apiError(404)), true);
    assert.equal(isNotFound(apiError(409)), false);
    assert.equal(isConflict(apiError(409)), true);
    assert.equal(isConflict(apiError(422)), false);
    assert.equal(isNotFound(new Error('connect ECONNREFUSED')), false);
  });

  it('ignoreNotFound: undefined for a 404, anything else thrown again', async () => {
    assert.equal(await Promise.reject(apiError(404)).catch(ignoreNotFound), undefined);
    await assert.rejects(Promise.reject(apiError(403)).catch(ignoreNotFound), /HTTP 403/);
  });

  it('createIfAbsent: the stored object when created, undefined when the name is taken, anything else thrown', async () => {
    const client = (result: () => Promise<unknown>) => ({ create: result as <R>() => Promise<R> });
    assert.deepEqual(await createIfAbsent(client(() => Promise.resolve({ uid: 'u1' })), '/x', {}), { uid: 'u1' });
    assert.equal(await createIfAbsent(client(() => Promise.reject(apiError(409))), '/x', {}), undefined);
    await assert.rejects(createIfAbsent(client(() => Promise.reject(apiError(422))), '/x', {}), /HTTP 422/);
  });
});
