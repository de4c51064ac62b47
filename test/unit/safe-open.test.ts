// The one safe open of an operator-named file (src/effects/safe-open.ts), on real special files: a FIFO, a symlink to
// /dev/zero, a character device, a sparse file, a directory swapped for a symlink. Each refusal comes at once (no
// wait, nothing read past the bound), and names what stands there.
import { execa } from 'execa';
import { mkdir, mkdtemp, readFile, rename, rm, stat, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HeldDir, readRegularSync } from '../../src/effects/safe-open.js';
import { UnsafePathError } from '../../src/effects/fs-atomic.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ipam-shim-safe-open-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** fn's value or error, and how long it took. */
function timed<T>(fn: () => T): { value?: T; error?: unknown; ms: number } {
  const t0 = performance.now();
  try {
    return { value: fn(), ms: performance.now() - t0 };
  } catch (error) {
    return { error, ms: performance.now() - t0 };
  }
}

describe('readRegularSync', () => {
  it('reads a regular file within the bound; a missing one is undefined', async () => {
    await writeFile(join(dir, 'f'), 'hello\n');
    expect(readRegularSync(join(dir, 'f'), 6)).toBe('hello\n');
    expect(readRegularSync(join(dir, 'missing'), 6)).toBeUndefined();
  });

  it('a FIFO with no writer: refused at once (not waited on), named as a FIFO', async () => {
    const fifo = join(dir, 'fifo');
    await execa('mkfifo', [fifo]);
    const r = timed(() => readRegularSync(fifo, 1024));
    expect(r.ms).toBeLessThan(1000);
    expect(r.error).toBeInstanceOf(UnsafePathError);
    expect((r.error as Error).message).toBe(`${fifo} is not a regular file (a FIFO)`);
  });

  it('a symlink to /dev/zero, /dev/zero itself, a directory: refused, nothing read', async () => {
    await symlink('/dev/zero', join(dir, 'zero'));
    expect(timed(() => readRegularSync(join(dir, 'zero'), 1024)).error).toMatchObject({ code: 'ELOOP' });
    expect((timed(() => readRegularSync('/dev/zero', 1024)).error as Error).message).toBe('/dev/zero is not a regular file (a character device)');
    await mkdir(join(dir, 'd'));
    expect(timed(() => readRegularSync(join(dir, 'd'), 1024)).error).toBeInstanceOf(UnsafePathError);
  });

  it('a sparse 2 GiB file: refused from its size within milliseconds, the memory not spent', async () => {
    const sparse = join(dir, 'sparse');
    await writeFile(sparse, '');
    await truncate(sparse, 2 * 1024 ** 3);
    const rss = process.memoryUsage().rss;
    const r = timed(() => readRegularSync(sparse, 1024 * 1024, '/shown/name'));
    expect(r.ms).toBeLessThan(500);
    expect((r.error as Error).message).toBe('/shown/name is 2147483648 bytes, over the 1048576-byte bound (not read)');
    expect(process.memoryUsage().rss - rss).toBeLessThan(64 * 1024 * 1024);
    // One byte over: refused too; at the bound: read.
    await writeFile(join(dir, 'small'), 'x'.repeat(11));
    expect(timed(() => readRegularSync(join(dir, 'small'), 10)).error).toBeInstanceOf(UnsafePathError);
    expect(readRegularSync(join(dir, 'small'), 11)).toBe('x'.repeat(11));
  });
});

describe('HeldDir', () => {
  it('a directory that is a symlink is refused; a real one is held', async () => {
    await mkdir(join(dir, 'real'));
    await symlink(join(dir, 'real'), join(dir, 'link'));
    expect(timed(() => HeldDir.open(join(dir, 'link'))).error).toMatchObject({ code: 'ELOOP' });
    HeldDir.open(join(dir, 'real')).close();
  });

  it('swapped for a symlink after it was opened: names resolve in the held directory, never in the victim', async () => {
    const logs = join(dir, 'logs');
    const victim = join(dir, 'victim');
    await mkdir(logs);
    await mkdir(victim);
    await writeFile(join(victim, 'ipam.log'), 'private\n', { mode: 0o600 });
    const held = HeldDir.open(logs);
    try {
      await rename(logs, join(dir, 'logs.old'));
      await symlink(victim, logs);
      await writeFile(held.at('ipam.log'), 'a line\n', { flag: 'a' });
      expect(await readFile(join(victim, 'ipam.log'), 'utf8')).toBe('private\n');
      expect(await readFile(join(dir, 'logs.old', 'ipam.log'), 'utf8')).toBe('a line\n');
      expect((await stat(join(victim, 'ipam.log'))).mode & 0o777).toBe(0o600);
    } finally {
      held.close();
    }
  });
});
