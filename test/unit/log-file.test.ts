// The bounded log file (src/effects/log-file.ts) in one process: rotation order and count, the hard bound (a line
// larger than the bound, a rotation that fails, the lock not had in time: the line is refused, for the caller to
// send to stderr), no backups, a descriptor whose file another writer rotated away, and a path that is not a regular
// file of its own (a FIFO, a symlink, a hard link, a directory; at the backups and the lock too). The many-process
// case runs the built executable: test/e2e/logs.test.ts.
import { execa } from 'execa';
import { closeSync, constants, openSync, readSync } from 'node:fs';
import { link, lstat, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, symlink, truncate, writeFile } from 'node:fs/promises';
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

/**
 * Opens the other end of `fifo` after 3 s (`read`: a reader; `write`: a writer that writes nothing), so that code
 * blocking on the FIFO is released and fails on its time instead of hanging the test runner. Returns its stop.
 */
function releaseAfter3s(fifo: string, end: 'read' | 'write') {
  const p = execa('sh', ['-c', end === 'read' ? 'sleep 3; exec cat "$0" >/dev/null' : 'sleep 3; exec tee "$0" </dev/null >/dev/null', fifo], {
    reject: false,
  });
  return async () => {
    p.kill('SIGKILL');
    await p;
  };
}

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

describe('LogFile on a path that is not a regular file of its own', () => {
  const bound = { maxBytes: 1000, backups: 2 };

  it('a FIFO with no reader: refused at once, never waited on', async () => {
    const path = join(dir, 'shim.log');
    await execa('mkfifo', [path]);
    const stop = releaseAfter3s(path, 'read');
    try {
      const r = timed(() => new LogFile(path, bound));
      expect(r.ms, `${Math.round(r.ms)} ms`).toBeLessThan(2000);
      expect(r.error).toMatchObject({ code: 'ENXIO' });
    } finally {
      await stop();
    }
  });

  it('a FIFO with a reader, a directory: refused (regular files only), nothing written to them', async () => {
    const fifo = join(dir, 'fifo.log');
    await execa('mkfifo', [fifo]);
    // The test is the FIFO's reader (a non-blocking read end opens at once and reads what was written, if anything).
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      const r = timed(() => (new LogFile(fifo, bound).append(line(0)) ? 'written' : 'refused'));
      const got = Buffer.alloc(4096);
      const n = (() => {
        try {
          return readSync(reader, got);
        } catch (e) {
          if ((e as { code?: string }).code === 'EAGAIN') return 0; // a writer holds it open, nothing written
          throw e;
        }
      })();
      expect(got.toString('utf8', 0, n)).toBe('');
      expect(r.error ?? r.value).toMatchObject({ message: `${fifo} is not a regular file (a FIFO)` });
    } finally {
      closeSync(reader);
    }
    await mkdir(join(dir, 'dir.log'));
    expect(timed(() => new LogFile(join(dir, 'dir.log'), bound)).error).toMatchObject({ code: 'EISDIR' });
  });

  it('a symlink or a hard link to a file elsewhere: refused, the file left byte-identical', async () => {
    const target = join(dir, 'private');
    const before = Buffer.from('not the log\n');
    await writeFile(target, before, { mode: 0o600 });
    await symlink(target, join(dir, 'sym.log'));
    expect(timed(() => new LogFile(join(dir, 'sym.log'), bound)).error).toMatchObject({ code: 'ELOOP' });
    await link(target, join(dir, 'hard.log'));
    expect(timed(() => new LogFile(join(dir, 'hard.log'), bound)).error).toMatchObject({
      message: `${join(dir, 'hard.log')} has 2 links (a hard link to a file elsewhere?)`,
    });
    expect((await readFile(target)).equals(before)).toBe(true);
  });

  it('a FIFO or a symlink put at the path after it was opened: never followed nor waited on, the line refused', async () => {
    const path = join(dir, 'shim.log');
    const target = join(dir, 'private');
    const before = Buffer.from('not the log\n');
    await writeFile(target, before, { mode: 0o600 });
    const f = new LogFile(path, bound);
    f.append(line(0));
    await rename(path, join(dir, 'moved'));
    await execa('mkfifo', [path]);
    const stop = releaseAfter3s(path, 'read');
    try {
      const r = timed(() => f.append(line(1)));
      expect(r.ms, `${Math.round(r.ms)} ms`).toBeLessThan(2000);
      expect(r.value).toBe(false);
    } finally {
      await stop();
    }
    await rm(path);
    await symlink(target, path);
    expect(f.append(line(2))).toBe(false);
    expect((await readFile(target)).equals(before)).toBe(true);
    expect((await lstat(path)).isSymbolicLink()).toBe(true);
  });

  it('symlinks at the backups: rotation moves the links, never writes through them', async () => {
    const path = join(dir, 'shim.log');
    const target = join(dir, 'private');
    const before = Buffer.from('not the log\n');
    await writeFile(target, before, { mode: 0o600 });
    await symlink(target, `${path}.1`);
    await symlink(target, `${path}.2`);
    const f = new LogFile(path, bound);
    for (let i = 0; i < 35; i++) expect(f.append(line(i))).toBe(true);
    expect((await readFile(target)).equals(before)).toBe(true);
    for (const n of ['shim.log', 'shim.log.1', 'shim.log.2']) expect((await lstat(join(dir, n))).isFile(), n).toBe(true);
  });

  it('a FIFO at the rotate lock: the line waits at most the lock wait, then is refused; the FIFO is not read', async () => {
    const path = join(dir, 'shim.log');
    const lock = `${path}.rotate.lock`;
    await execa('mkfifo', [lock]);
    const f = new LogFile(path, bound);
    const stop = releaseAfter3s(lock, 'write');
    try {
      const r = timed(() => f.append(line(0)));
      expect(r.ms, `${Math.round(r.ms)} ms`).toBeLessThan(2000);
      expect(r.value).toBe(false);
    } finally {
      await stop();
    }
    expect((await stat(lock)).isFIFO()).toBe(true);
  });

  it('a sparse 2 GiB file at the rotate lock: refused at once, not read (it cost every line 1.9 GiB)', async () => {
    const path = join(dir, 'shim.log');
    const lock = `${path}.rotate.lock`;
    await writeFile(lock, '');
    await truncate(lock, 2 * 1024 ** 3);
    const f = new LogFile(path, bound);
    const rss = process.memoryUsage().rss;
    const r = timed(() => f.append(line(0)));
    expect(r.ms, `${Math.round(r.ms)} ms`).toBeLessThan(150);
    expect(r.value).toBe(false);
    expect(process.memoryUsage().rss - rss).toBeLessThan(64 * 1024 * 1024);
    expect((await stat(lock)).size).toBe(2 * 1024 ** 3);
  });
});

describe('LogFile in a directory that is not a directory of its own', () => {
  const bound = { maxBytes: 1000, backups: 2 };

  it('a log directory that is a symlink: refused; the victim directory gets no file', async () => {
    const victim = join(dir, 'victim');
    await mkdir(victim);
    await symlink(victim, join(dir, 'logs'));
    expect(() => new LogFile(join(dir, 'logs', 'ipam.log'), bound)).toThrow(/logs is a symlink/);
    expect(await readdir(victim)).toEqual([]);
  });

  it('swapped for a symlink while a process logs: lines and rotations stay in the directory it opened', async () => {
    const logs = join(dir, 'logs');
    const victim = join(dir, 'victim');
    await mkdir(victim);
    const before = Buffer.from('a private file\n');
    await writeFile(join(victim, 'ipam.log'), before, { mode: 0o600 });
    const f = new LogFile(join(logs, 'ipam.log'), bound);
    expect(f.append(line(0))).toBe(true);
    await rename(logs, join(dir, 'logs.old'));
    await symlink(victim, logs);
    for (let i = 1; i < 30; i++) expect(f.append(line(i))).toBe(true);
    expect(await readdir(victim)).toEqual(['ipam.log']);
    expect((await readFile(join(victim, 'ipam.log'))).equals(before)).toBe(true);
    expect((await readdir(join(dir, 'logs.old'))).sort()).toEqual(['ipam.log', 'ipam.log.1', 'ipam.log.2']);
  });
});
