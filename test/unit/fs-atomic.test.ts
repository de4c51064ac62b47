// writeFileAtomic's temp files on a real file system (temp dir, no root): named by pid and attempt, created
// O_EXCL|O_NOFOLLOW, so a name someone else holds (a dead process with a reused pid, a planted link) is skipped,
// never written through.
import { execa } from 'execa';
import { lstat, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readFileNoFollowSync, removeFile, tempNameFor, writeFileAtomic } from '../../src/effects/fs-atomic.js';

let dir: string | undefined;
afterEach(async () => dir && rm(dir, { recursive: true, force: true }));

async function world() {
  dir = await mkdtemp(join(tmpdir(), 'fs-atomic-'));
  const target = join(dir, 'victim');
  await writeFile(target, 'untouched');
  return { dir, file: join(dir, 'rec.json'), target };
}

describe('writeFileAtomic temp names', () => {
  it('are .<name>.<pid>.<attempt>.tmp beside the file, with no random part', () => {
    expect(tempNameFor('/s/net/records/a:eth0.json', 0)).toBe(`/s/net/records/.a:eth0.json.${process.pid}.0.tmp`);
    expect(tempNameFor('/s/net/records/a:eth0.json', 3)).toBe(`/s/net/records/.a:eth0.json.${process.pid}.3.tmp`);
  });

  it('skips names already taken (links planted at them are never written through) and leaves no temp of its own', async () => {
    const w = await world();
    for (let i = 0; i < 16; i++) await symlink(w.target, tempNameFor(w.file, i));
    await writeFileAtomic(w.file, 'new', { durable: false });
    expect(await readFile(w.file, 'utf8')).toBe('new');
    expect(await readFile(w.target, 'utf8')).toBe('untouched');
    for (let i = 0; i < 16; i++) expect((await lstat(tempNameFor(w.file, i))).isSymbolicLink()).toBe(true);
    expect((await readdir(w.dir)).filter((n) => n.endsWith('.tmp'))).toHaveLength(16);
  });

  it('gives up with EEXIST when every name is taken, writing nothing', async () => {
    const w = await world();
    for (let i = 0; i < 64; i++) await writeFile(tempNameFor(w.file, i), 'a dead writer');
    await expect(writeFileAtomic(w.file, 'new', { durable: true })).rejects.toMatchObject({ code: 'EEXIST' });
    await expect(lstat(w.file)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('replaces the file either way (durable or not) with the given mode; removeFile of a missing file is success', async () => {
    const w = await world();
    await writeFileAtomic(w.file, 'one', { durable: true, mode: 0o644 });
    expect(((await lstat(w.file)).mode & 0o777).toString(8)).toBe('644');
    await writeFileAtomic(w.file, 'two', { durable: false });
    expect(await readFile(w.file, 'utf8')).toBe('two');
    await removeFile(w.file, { durable: true });
    await removeFile(w.file, { durable: true });
    await expect(lstat(w.file)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('readFileNoFollowSync (ledger records and index entries)', () => {
  it('a FIFO planted at a record: refused at once (it blocked the open forever), never waited on', async () => {
    const w = await world();
    await execa('mkfifo', [w.file]);
    const t0 = performance.now();
    expect(() => readFileNoFollowSync(w.file)).toThrow(`${w.file} is not a regular file`);
    expect(performance.now() - t0).toBeLessThan(1000);
  });
});
