// The bounded log file (src/effects/log-file.ts) in one process: rotation order and count, the hard bound (a line
// larger than the bound, a rotation that fails, the lock not had in time: the line is refused, for the caller to
// send to stderr), no backups, and a descriptor whose file another writer rotated away. The many-process case runs
// the built executable: test/e2e/logs.test.ts.
import { execa } from 'execa';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LogFile } from '../../src/effects/log-file.js';

let dir = '';
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ipam-shim-logfile-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const line = (i: number, size = 100) => Buffer.from(`${JSON.stringify({ i, pad: 'x'.repeat(size - 20) }).slice(0, size - 1)}\n`);
const files = async () => (await readdir(dir)).sort();

describe('LogFile', () => {
  it('rotates before a line would pass the bound, keeps `backups` files, drops the oldest', async () => {
    const path = join(dir, 'shim.log');
    const f = new LogFile(path, { maxBytes: 1000, backups: 2 });
    for (let i = 0; i < 45; i++) f.append(line(i));
    expect(await files()).toEqual(['shim.log', 'shim.log.1', 'shim.log.2']);
    for (const n of await files()) expect((await readFile(join(dir, n))).length).toBeLessThanOrEqual(1000);
    // 10 lines a file: the newest 5 in shim.log, the 10 before in .1, the 10 before those in .2.
    const first = async (n: string) => JSON.parse((await readFile(join(dir, n), 'utf8')).split('\n')[0]!).i;
    expect([await first('shim.log.2'), await first('shim.log.1'), await first('shim.log')]).toEqual([20, 30, 40]);
  });

  it('backups 0 drops the full file', async () => {
    const path = join(dir, 'shim.log');
    const f = new LogFile(path, { maxBytes: 4096, backups: 0 });
    for (let i = 0; i < 45; i++) expect(f.append(line(i))).toBe(true);
    expect(await files()).toEqual(['shim.log']);
    // Lines 0–40 fill 4,008 of the 4,096 bytes: dropped with their file when line 41 came.
    expect((await readFile(path, 'utf8')).startsWith('{"i":41,')).toBe(true);
  });

  it('a line larger than the bound is refused (false): no file can hold it within the bound', async () => {
    const path = join(dir, 'shim.log');
    const f = new LogFile(path, { maxBytes: 4096, backups: 1 });
    const exact = Buffer.from(`{"i":2,"pad":"${'x'.repeat(4096 - 17)}"}\n`); // the bound itself: rotated into an empty file
    const written = [f.append(line(0)), f.append(line(1, 5000)), f.append(exact)];
    expect(await files()).toEqual(['shim.log', 'shim.log.1']);
    expect((await readFile(path)).length).toBe(4096);
    expect(JSON.parse(await readFile(`${path}.1`, 'utf8')).i).toBe(0);
    expect(written).toEqual([true, false, true]);
  });

  it('a rotation that fails: the line is refused (false), the file stays within the bound', async () => {
    const path = join(dir, 'shim.log');
    await mkdir(join(dir, 'shim.log.1'));
    await writeFile(join(dir, 'shim.log.1', 'keep'), ''); // rename onto a non-empty directory fails
    const f = new LogFile(path, { maxBytes: 1000, backups: 1 });
    const written = Array.from({ length: 15 }, (_, i) => f.append(line(i)));
    expect((await readFile(path, 'utf8')).split('\n').filter(Boolean)).toHaveLength(10); // 970 bytes: line 10 would pass 1000
    expect(await files()).toEqual(['shim.log', 'shim.log.1']); // no lock left behind
    expect(written).toEqual([...Array(10).fill(true), ...Array(5).fill(false)]);
  });

  it('the lock not had within its wait (a live holder): the line is refused (false), never written past the bound', async () => {
    const path = join(dir, 'shim.log');
    const f = new LogFile(path, { maxBytes: 1000, backups: 1 });
    for (let i = 0; i < 10; i++) f.append(line(i)); // full (970 bytes): the next line must rotate first
    const full = await readFile(path);
    const holder = execa('sleep', ['30'], { reject: false });
    try {
      await writeFile(`${path}.rotate.lock`, `${holder.pid} ?`);
      const r = timed(() => f.append(line(10)));
      expect((await readFile(path)).equals(full)).toBe(true);
      expect(await files()).toEqual(['shim.log', 'shim.log.rotate.lock']);
      expect(r.ms).toBeLessThan(2000);
      expect(r.value).toBe(false);
    } finally {
      holder.kill('SIGKILL');
      await holder;
    }
  });

  it('a writer whose file another writer rotated away writes to the new file', async () => {
    const path = join(dir, 'shim.log');
    const a = new LogFile(path, { maxBytes: 1000, backups: 1 });
    const b = new LogFile(path, { maxBytes: 1000, backups: 1 });
    for (let i = 0; i < 10; i++) a.append(line(i)); // full
    a.append(line(10)); // a rotates: b's descriptor now names shim.log.1, which is full
    b.append(line(11));
    expect(
      (await readFile(path, 'utf8'))
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l).i),
    ).toEqual([10, 11]);
    // Rotated out of existence (backups 1: .1 dropped at the next rotation): a writer still on it reopens.
    const c = new LogFile(path, { maxBytes: 1000, backups: 1 });
    for (let i = 12; i < 30; i++) a.append(line(i));
    c.append(line(99));
    const all = [...(await readFile(path, 'utf8')).split('\n'), ...(await readFile(`${path}.1`, 'utf8')).split('\n')]
      .filter(Boolean)
      .map((l) => JSON.parse(l).i);
    expect(all).toContain(99);
  });
});

/** Runs `fn`, timing it; what it threw, if anything. */
function timed(fn: () => unknown): { ms: number; error?: unknown; value?: unknown } {
  const started = performance.now();
  try {
    const value = fn();
    return { ms: performance.now() - started, value };
  } catch (error) {
    return { ms: performance.now() - started, error };
  }
}
