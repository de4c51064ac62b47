// The runtime's result cache read as untrusted input (issue 34 items 2 and 3): an entry's container ID and interface
// name pass libcni's own rules or the entry is ignored (never a path); the ledger refuses any path that would leave
// its directory; files are opened without following links or blocking, regular files only, at most 1 MiB, and what
// cannot be looked at is named by file, never quoted; a file gone since the listing is gone, not unknowable.
import { execFileSync } from 'node:child_process';
import { closeSync, constants, existsSync, openSync, readFileSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { validContainerID, validInterfaceName } from '../../src/cni/env.js';
import { Ledger } from '../../src/effects/ledger.js';
import { PathEscapeError } from '../../src/effects/ledger-dir.js';
import { cachedAttachments, MAX_CACHE_ENTRIES, RuntimeCacheError } from '../../src/gc/from-cache.js';
import { MAX_CACHE_ENTRY_BYTES } from '../../src/gc/cache-file.js';

let dir: string | undefined;
const fifos: string[] = [];
afterEach(async () => {
  // The code before this change blocked in open() on a FIFO: a writer's open lets it go, so no thread stays stuck.
  for (const f of fifos.splice(0)) {
    try {
      closeSync(openSync(f, constants.O_RDWR | constants.O_NONBLOCK));
    } catch {
      // gone already
    }
  }
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

const entry = (containerId: unknown, ifName: unknown, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    kind: 'cniCacheV1',
    containerId,
    ifName,
    networkName: 'net',
    config: 'e30=',
    result: { ips: [{ address: '10.0.0.2/24' }] },
    ...extra,
  });

async function cacheDir(files: Record<string, string> = {}): Promise<{ root: string; results: string }> {
  dir = await mkdtemp(join(tmpdir(), 'runtime-cache-'));
  const results = join(dir, 'cache', 'results');
  await mkdir(results, { recursive: true });
  for (const [name, text] of Object.entries(files)) await writeFile(join(results, name), text);
  return { root: join(dir, 'cache'), results };
}

/** The error cachedAttachments threw (the test fails if it returned). */
async function refusal(root: string): Promise<RuntimeCacheError> {
  const e = await cachedAttachments(root, 'net').then(
    (v) => v,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(RuntimeCacheError);
  return e as RuntimeCacheError;
}

describe("libcni's name rules (ValidateContainerID, ValidateInterfaceName): one rule for CNI_* and the cache", () => {
  it.each(['eth0', 'net1', 'a', 'x'.repeat(15), 'vlan.10', 'é'])('interface name %j is valid', (n) => expect(validInterfaceName(n)).toBeUndefined());
  it.each(['', '.', '..', 'x'.repeat(16), 'é'.repeat(8), 'a/b', '../x', 'eth0:1', 'eth 0', 'eth\t0', 'eth\n0', 'eth\u00a00', 'eth\u00850'])(
    'interface name %j is refused',
    (n) => expect(validInterfaceName(n)).toBeDefined(),
  );
  it.each(['abc', 'A1', '0123abcdef'.repeat(7), 'pod_1.2-3'])('container ID %j is valid', (id) => expect(validContainerID(id)).toBeUndefined());
  it.each(['', '-a', '.a', '_a', 'a/../../x', 'a:b', 'a b', '../x', 'a\0b'])('container ID %j is refused', (id) =>
    expect(validContainerID(id)).toBeDefined(),
  );
});

describe('cache entries whose names libcni would refuse', () => {
  it('are ignored by file name and never become attachments; the valid entry is read', async () => {
    const { root } = await cacheDir({
      'net-ok-eth0': entry('ok', 'eth0'),
      'net-trav-eth0': entry('a/../../../victim/x', 'eth0'),
      'net-trav-if': entry('b', '../../victim/y'),
      'net-colon-if': entry('c', 'eth0:1'),
      'net-long-if': entry('d', 'x'.repeat(16)),
      'net-empty-if': entry('e', ''),
      'net-dot-id': entry('..', 'eth0'),
    });
    const view = await cachedAttachments(root, 'net');
    expect(view.attachments).toEqual([{ containerID: 'ok', ifname: 'eth0' }]);
    expect(view.pods.map((p) => p.containerID)).toEqual(['ok']);
    expect(Object.fromEntries(view.ignored.map((i) => [i.file, i.why]))).toEqual({
      'net-trav-eth0': expect.stringMatching(/^containerId must match/),
      'net-trav-if': expect.stringMatching(/^ifName contains "\/"/),
      'net-colon-if': expect.stringMatching(/^ifName contains "\/", ":"/),
      'net-long-if': 'ifName longer than 15 bytes',
      'net-empty-if': 'ifName is empty',
      'net-dot-id': expect.stringMatching(/^containerId must match/),
    });
  });
});

describe('the ledger never builds a path outside its directory', () => {
  it('an attachment whose names would leave it: PathEscapeError, the file there untouched (the stale-lock breaker unlinked it)', async () => {
    dir = await mkdtemp(join(tmpdir(), 'ledger-escape-'));
    const stateDir = join(dir, 'state');
    const ledger = await new Ledger(stateDir, 'net').open();
    // <stateDir>/net/.attach-a/../../../victim/x:eth0.lock is <dir>/victim/x:eth0.lock
    await mkdir(join(dir, 'victim'));
    const victim = join(dir, 'victim', 'x:eth0.lock');
    writeFileSync(victim, 'not a live holder\n');
    let ran = false;
    const escaping = { containerID: 'a/../../../victim/x', ifname: 'eth0' };
    await expect(
      ledger.lockedAttachment(escaping, 100, async () => {
        ran = true;
      }),
    ).rejects.toBeInstanceOf(PathEscapeError);
    expect(ran).toBe(false);
    expect(readFileSync(victim, 'utf8')).toBe('not a live holder\n');
    await expect(ledger.get(escaping)).rejects.toBeInstanceOf(PathEscapeError);
    await expect(ledger.get({ containerID: 'ok', ifname: '../../../victim/x' })).rejects.toBeInstanceOf(PathEscapeError);
    expect(() => ledger.recordPath({ containerID: 'ok', ifname: 'a/b' })).toThrow(PathEscapeError);
    await expect(ledger.lockedAgentOwner('../../victim/x', async () => undefined)).rejects.toBeInstanceOf(PathEscapeError);
    expect(existsSync(victim)).toBe(true);
    // An ordinary attachment still works.
    await expect(ledger.lockedAttachment({ containerID: 'ok', ifname: 'eth0' }, 100, async () => 'ran')).resolves.toBe('ran');
  });
});

describe('cache files that are not what libcni writes', () => {
  it('a FIFO of this network is "could not look" at once, named by file (it blocked the read, and the agent, for good)', {
    timeout: 10_000,
  }, async () => {
    const { root, results } = await cacheDir({ 'net-ok-eth0': entry('ok', 'eth0') });
    const fifo = join(results, 'net-fifo-eth0');
    execFileSync('mkfifo', [fifo]);
    fifos.push(fifo);
    const t0 = Date.now();
    const e = await refusal(root);
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(e.path).toBe(fifo);
    expect(e.why).toBe('is not a regular file (a FIFO)');
    expect(e.message).toContain('refusing to GC on an incomplete list');
  });

  it("a symlink (to a root-only file) is not followed: named, its target's bytes never in the message", async () => {
    const { root, results } = await cacheDir();
    const secret = join(dir!, 'secret');
    writeFileSync(secret, 'TOPSECRET-0123456789', { mode: 0o600 });
    symlinkSync(secret, join(results, 'net-link-eth0'));
    const e = await refusal(root);
    expect(e.path).toBe(join(results, 'net-link-eth0'));
    expect(e.why).toBe('is a symbolic link (not followed)');
    expect(e.message).not.toContain('TOPSECRET');
  });

  it("a file that is not JSON: named, the parser's message (which quotes the text) left out", async () => {
    const { root, results } = await cacheDir({ 'net-junk-eth0': 'TOPSECRET-0123456789 is not json' });
    const e = await refusal(root);
    expect(e.path).toBe(join(results, 'net-junk-eth0'));
    expect(e.why).toBe('is not valid JSON');
    expect(e.message).not.toContain('TOPSECRET');
  });

  it(`a file over ${MAX_CACHE_ENTRY_BYTES} bytes (here a sparse 1 GB one) is refused by its size, never read`, async () => {
    const { root, results } = await cacheDir({ 'net-ok-eth0': entry('ok', 'eth0') });
    const big = join(results, 'net-big-eth0');
    writeFileSync(big, '');
    truncateSync(big, 1e9);
    const rss0 = process.memoryUsage.rss();
    const e = await refusal(root);
    expect(e.why).toBe(`is 1000000000 bytes, more than the ${MAX_CACHE_ENTRY_BYTES} a cache entry may be`);
    expect(process.memoryUsage.rss() - rss0).toBeLessThan(64 * 1048576);
  });

  it('a directory is refused; a FIFO or link of another network (a longer name sharing the prefix) does not block', async () => {
    const { root, results } = await cacheDir({
      'net-ok-eth0': entry('ok', 'eth0'),
      'net-b-c1-eth0': JSON.stringify({ kind: 'cniCacheV1', containerId: 'c1', ifName: 'eth0', networkName: 'net-b' }),
    });
    execFileSync('mkfifo', [join(results, 'net-b-fifo-eth0')]);
    fifos.push(join(results, 'net-b-fifo-eth0'));
    symlinkSync('/etc/hostname', join(results, 'net-b-link-eth0'));
    expect((await cachedAttachments(root, 'net')).attachments).toEqual([{ containerID: 'ok', ifname: 'eth0' }]);
    await mkdir(join(results, 'net-dir-eth0'));
    expect((await refusal(root)).why).toBe('is not a regular file (a directory)');
  });

  it(`more than ${MAX_CACHE_ENTRIES} entries of the network: "could not look"`, { timeout: 60_000 }, async () => {
    const { root, results } = await cacheDir();
    for (let i = 0; i <= MAX_CACHE_ENTRIES; i++) writeFileSync(join(results, `net-p${i}-eth0`), entry(`p${i}`, 'eth0'));
    const e = await refusal(root);
    expect(e.path).toBe(results);
    expect(e.why).toContain(`holds more than the ${MAX_CACHE_ENTRIES} entries of network net a pass reads`);
  });
});
