import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { normalizedImage, sameImage } from './image-reference.ts';

describe('normalizedImage (R7): a Pod spec\'s short image names as the runtime reports them', () => {
  const rows: [string, string][] = [
    ['busybox', 'docker.io/library/busybox:latest'],
    ['busybox:1.36', 'docker.io/library/busybox:1.36'],
    ['team/app', 'docker.io/team/app:latest'],
    ['docker.io/library/busybox:1.36', 'docker.io/library/busybox:1.36'],
    ['registry.example.com/team/app:2', 'registry.example.com/team/app:2'],
    ['registry.example.com:5000/app', 'registry.example.com:5000/app:latest'],
    ['localhost/app', 'localhost/app:latest'],
    ['app@sha256:abc', 'docker.io/library/app@sha256:abc'],
  ];
  for (const [reference, want] of rows) it(`${reference} → ${want}`, () => assert.equal(normalizedImage(reference), want));

  it('same and different images', () => {
    assert.equal(sameImage('busybox', 'docker.io/library/busybox:latest'), true);
    assert.equal(sameImage('busybox:1.36', 'docker.io/library/busybox:1.37'), false);
    assert.equal(sameImage('app@sha256:abc', 'docker.io/library/app:1'), false);
  });
});
