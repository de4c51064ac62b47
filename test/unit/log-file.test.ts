// The bounded log file (src/effects/log-file.ts) in one process: rotation order and count, a line larger than the
// bound, no backups, a rotation that fails (the line still written), and a descriptor whose file another writer
// rotated away. The many-process case runs the built executable: test/e2e/logs.test.ts.
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

  it('a line larger than the bound goes into an empty file; backups 0 drops the full file', async () => {
    const path = join(dir, 'shim.log');
    const f = new LogFile(path, { maxBytes: 4096, backups: 0 });
    f.append(line(0, 5000));
    f.append(line(1, 5000));
    expect(await files()).toEqual(['shim.log']);
    expect((await readFile(path, 'utf8')).startsWith('{"i":1')).toBe(true);
  });

  it('a rotation that fails leaves the line in the file, beyond the bound', async () => {
    const path = join(dir, 'shim.log');
    await mkdir(join(dir, 'shim.log.1'));
    await writeFile(join(dir, 'shim.log.1', 'keep'), ''); // rename onto a non-empty directory fails
    const f = new LogFile(path, { maxBytes: 1000, backups: 1 });
    for (let i = 0; i < 15; i++) f.append(line(i));
    expect((await readFile(path, 'utf8')).split('\n').filter(Boolean)).toHaveLength(15);
    expect(await files()).toEqual(['shim.log', 'shim.log.1']); // no lock left behind
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
