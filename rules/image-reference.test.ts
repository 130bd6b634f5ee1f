import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { imageAllowed, normalizedImage, sameImage } from './image-reference.ts';

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

describe('imageAllowed (R22): the images --agentless-swap-images lets in', () => {
  const digest = `sha256:${'a'.repeat(64)}`;
  const rows: Array<{ image: string; allowed: string[]; want: boolean }> = [
    { image: 'registry.example.com/qe:1', allowed: ['registry.example.com/qe'], want: true },
    { image: `registry.example.com/qe@${digest}`, allowed: ['registry.example.com/qe'], want: true },
    { image: `registry.example.com/qe:1@${digest}`, allowed: ['registry.example.com/qe'], want: true },
    { image: 'registry.example.com:5000/qe:1', allowed: ['registry.example.com:5000/qe'], want: true },
    { image: 'registry.example.com:5000/qe:1', allowed: ['registry.example.com/qe'], want: false },
    { image: 'registry.example.com/qe', allowed: ['registry.example.com/qe:latest'], want: true },
    { image: 'registry.example.com/qe:2', allowed: ['registry.example.com/qe:1'], want: false },
    { image: `registry.example.com/qe@${digest}`, allowed: [`registry.example.com/qe@${digest}`], want: true },
    { image: 'registry.example.com/qe:1', allowed: [`registry.example.com/qe@${digest}`], want: false },
    { image: 'registry.example.com/qe-evil:1', allowed: ['registry.example.com/qe'], want: false },
    { image: 'registry.example.com/qe/evil:1', allowed: ['registry.example.com/qe'], want: false },
    { image: 'evil.example.com/registry.example.com/qe:1', allowed: ['registry.example.com/qe'], want: false },
    { image: 'busybox:1.36', allowed: ['docker.io/library/busybox'], want: true },
    { image: 'library/busybox', allowed: [' busybox '], want: true },
    { image: 'registry.example.com/qe:1', allowed: [], want: false },
    { image: 'registry.example.com/qe:1', allowed: ['other.example.com/x', 'registry.example.com/qe'], want: true },
  ];
  for (const { image, allowed, want } of rows) {
    it(`${image} on [${allowed.join(', ')}]: ${want ? 'allowed' : 'refused'}`, () => assert.equal(imageAllowed(image, allowed), want));
  }
});
