// libcni's DEL removes a pod's cache file at any time, so a file listed by readdir may be gone when it is opened: a
// normal race, not an unreadable cache. Before, it aborted the whole read (`ipam-shim gc` exit 3, the agent's cache
// "unreadable"). The race is made exact here: readdir (node:fs/promises, what the reader lists with) removes one
// listed file right after listing it.
import { unlinkSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';

const vanish: { path?: string } = {};
vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  const readdir = (async (...args: Parameters<typeof real.readdir>) => {
    const names = await real.readdir(...args);
    if (vanish.path) unlinkSync(vanish.path);
    return names;
  }) as typeof real.readdir;
  return { ...real, default: { ...real, readdir }, readdir };
});

const { cachedAttachments } = await import('../../src/gc/from-cache.js');

let dir: string | undefined;
afterEach(async () => {
  vanish.path = undefined;
  if (dir) await rm(dir, { recursive: true, force: true });
});

const entry = (containerId: string) => JSON.stringify({ kind: 'cniCacheV1', containerId, ifName: 'eth0', networkName: 'net', result: {} });

describe('a cache file removed between readdir and its read', () => {
  it('is gone (skipped), not "could not look": the other entries are the list', async () => {
    dir = await mkdtemp(join(tmpdir(), 'cache-race-'));
    const results = join(dir, 'results');
    await mkdir(results);
    for (const id of ['a', 'b', 'c']) await writeFile(join(results, `net-${id}-eth0`), entry(id));
    vanish.path = join(results, 'net-b-eth0');
    const view = await cachedAttachments(dir, 'net');
    expect(view.blind).toBeUndefined();
    expect(view.attachments.map((a) => a.containerID).sort()).toEqual(['a', 'c']);
  });
});
