// File modes the BUILT shim creates, and the state directories it refuses: the ledger decides which addresses
// GC releases, so nobody but root may be able to write it.
import { execa } from 'execa';
import { chmod, chown, lstat, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { invoke, PLUGIN_DIR, scratch } from '../support/shim/cni.js';
import { hostLocal, shimConf } from '../support/shim/conf.js';
import { rootOrSkip, uid } from '../support/net/netns.js';
import { hostLocalStore, readLedger } from '../support/shim/robust.js';
import { ErrorCode } from '../../src/cni/errors.js';

const haveRoot = rootOrSkip();

let s: Awaited<ReturnType<typeof scratch>>;
let network: string;
beforeEach(async () => {
  s = await scratch();
  network = `perm-${uid()}`;
});
afterEach(async () => {
  await s.cleanup();
});

const conf = (cniVersion = '1.1.0', over: Record<string, unknown> = {}) =>
  shimConf({
    cniVersion,
    name: network,
    dirs: { stateDir: s.stateDir, logFile: join(s.dir, 'logs', 'shim.log') },
    probeRewrite: false,
    delegate: hostLocal(s.dataDir, '10.240.77.0/24'),
    keys: over,
  });
const call = (command: string, cid = 'pod-1', extra: Record<string, unknown> = {}) =>
  invoke(
    { ...conf(), ...extra },
    {
      command,
      containerID: ['GC', 'STATUS'].includes(command) ? '' : cid,
      // A gone netns whose directory exists (the scratch dir): provably dead, also on a fresh machine without /run/netns.
      netns: ['GC', 'STATUS'].includes(command) ? '' : join(s.dir, `gone-${cid}`),
      ifname: ['GC', 'STATUS'].includes(command) ? '' : 'eth0',
      path: [PLUGIN_DIR],
    },
  );

/** Every path under dir with its type and permission bits. */
/** The last log line whose msg matches. */
async function logLine(msg: RegExp): Promise<Record<string, unknown> | undefined> {
  const lines = (await readFile(join(s.dir, 'logs', 'shim.log'), 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return lines.filter((l) => msg.test(String(l.msg))).at(-1);
}

async function modes(dir: string): Promise<Array<{ path: string; type: 'dir' | 'file' | 'other'; mode: number; uid: number }>> {
  const out = [];
  for (const n of await readdir(dir)) {
    const p = join(dir, n);
    const st = await lstat(p);
    out.push({
      path: p,
      type: st.isDirectory() ? ('dir' as const) : st.isFile() ? ('file' as const) : ('other' as const),
      mode: st.mode & 0o7777,
      uid: st.uid,
    });
    if (st.isDirectory()) out.push(...(await modes(p)));
  }
  return out;
}

async function nobody(): Promise<{ uid: number; gid: number }> {
  const r = await execa('id', ['-u', 'nobody'], { reject: false });
  const g = await execa('id', ['-g', 'nobody'], { reject: false });
  return { uid: r.exitCode === 0 ? Number(r.stdout) : 65534, gid: g.exitCode === 0 ? Number(g.stdout) : 65534 };
}

describe.skipIf(!haveRoot)('modes of what the shim creates', () => {
  it('state dirs 0700, records and index entries 0600, the log file not writable by group or others', async () => {
    const added = await call('ADD');
    expect(added.exitCode, added.stdout).toBe(0);
    expect((await call('ADD', 'pod-2')).exitCode).toBe(0);
    expect((await call('STATUS')).exitCode).toBe(0); // writes and removes a probe file
    const all = await modes(s.stateDir);
    expect((await stat(s.stateDir)).mode & 0o777).toBe(0o700);
    expect(all.filter((e) => e.type === 'dir').map((e) => [e.path, e.mode.toString(8)])).toEqual(
      all.filter((e) => e.type === 'dir').map((e) => [e.path, '700']),
    );
    const files = all.filter((e) => e.type === 'file');
    expect(files.map((f) => f.path.slice(s.stateDir.length + 1)).sort()).toEqual(
      expect.arrayContaining([
        `${network}/records/pod-1:eth0.json`,
        `${network}/records/pod-2:eth0.json`,
        `${network}/ips/10.240.77.2`,
        `${network}/ips/10.240.77.3`,
      ]),
    );
    expect(files.map((f) => [f.path, f.mode.toString(8)])).toEqual(files.map((f) => [f.path, '600']));
    expect(all.filter((e) => e.type === 'other')).toEqual([]);
    expect(all.every((e) => e.uid === 0)).toBe(true);

    const log = await stat(join(s.dir, 'logs', 'shim.log'));
    expect(log.mode & 0o022, `log mode ${(log.mode & 0o777).toString(8)}`).toBe(0);
    expect((await stat(join(s.dir, 'logs'))).mode & 0o022).toBe(0);
  });

  it('a state dir created with group/other read bits by someone else is tightened to 0700 (the network level)', async () => {
    await mkdir(join(s.stateDir, network), { recursive: true, mode: 0o755 });
    await chmod(join(s.stateDir, network), 0o755);
    expect((await call('ADD')).exitCode).toBe(0);
    expect((await stat(join(s.stateDir, network))).mode & 0o777).toBe(0o700);
  });
});

describe.skipIf(!haveRoot)('state dirs the shim refuses (103), allocating nothing', () => {
  const ownedByNobody = async (dir: string) => {
    const n = await nobody();
    await chown(dir, n.uid, n.gid);
  };
  const levels = {
    'the stateDir itself': () => s.stateDir,
    'the network dir': () => join(s.stateDir, network),
    'the records dir': () => join(s.stateDir, network, 'records'),
  };
  const cases: Array<[keyof typeof levels, string, (dir: string) => Promise<void>]> = [
    ['the stateDir itself', 'owned by another user (nobody)', ownedByNobody],
    ['the stateDir itself', 'writable by others (0777)', (dir) => chmod(dir, 0o777)],
    ['the stateDir itself', 'writable by group (0770)', (dir) => chmod(dir, 0o770)],
    ['the network dir', 'owned by another user (nobody)', ownedByNobody],
    ['the network dir', 'writable by others (0777)', (dir) => chmod(dir, 0o777)],
    ['the records dir', 'owned by another user (nobody)', ownedByNobody],
    ['the records dir', 'writable by others (0777)', (dir) => chmod(dir, 0o777)],
  ];
  for (const [level, what, spoil] of cases) {
    it(`${level} ${what}: ADD, CHECK, GC refuse with 103 naming it; STATUS says 50; DEL releases and succeeds, the record left`, async () => {
      // An existing attachment, so GC would have something to release if it trusted the directory.
      expect((await call('ADD', 'old')).exitCode).toBe(0);
      const dir = levels[level]();
      await spoil(dir);
      const before = await hostLocalStore(s.dataDir, network);

      const add = await call('ADD');
      expect(add.json, add.stdout).toMatchObject({ code: ErrorCode.LedgerCorrupt });
      expect(`${add.json.msg} ${add.json.details ?? ''}`).toContain(dir);
      expect((await call('CHECK', 'old')).json).toMatchObject({ code: ErrorCode.LedgerCorrupt });
      const gc = await call('GC', '', { 'cni.dev/valid-attachments': [] });
      expect(gc.json, gc.stdout).toMatchObject({ code: ErrorCode.LedgerCorrupt });
      expect(await hostLocalStore(s.dataDir, network)).toEqual(before);
      const status = await call('STATUS');
      expect(status.json, status.stdout).toMatchObject({ code: ErrorCode.PluginNotAvailable });
      expect([...before.values()]).toEqual(['old:eth0']);
      // DEL still releases the delegate's address (the delegate's store is not ours to distrust) and cannot
      // forget the record: it succeeds (the pod's teardown must not wait for an operator), the record stays for GC.
      const del = await call('DEL', 'old');
      expect(del.exitCode, del.stdout).toBe(0);
      expect(del.stdout).toBe('');
      expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
      expect(await logLine(/cannot write the ledger/)).toMatchObject({ code: ErrorCode.LedgerCorrupt });
      // Nothing was written into the spoiled directory by any of these calls.
      const ledger = await readLedger(s.stateDir, network);
      expect(ledger.temps).toEqual([]);
    });
  }

  it('a network dir holding files that are not a ledger\'s (stateDir "/", network "etc") → 103, never chmodded or written', async () => {
    const dir = join(s.stateDir, network);
    await mkdir(dir, { recursive: true, mode: 0o755 });
    await chmod(dir, 0o755);
    await writeFile(join(dir, 'passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
    const add = await call('ADD');
    expect(add.json, add.stdout).toMatchObject({ code: ErrorCode.LedgerCorrupt });
    expect(`${add.json.msg} ${add.json.details ?? ''}`).toContain(dir);
    expect((await stat(dir)).mode & 0o777).toBe(0o755);
    expect(await readdir(dir)).toEqual(['passwd']);
    expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
  });

  it('a regular file where the state dir should be → 103 (or 5), not a crash', async () => {
    await mkdir(s.stateDir, { recursive: true, mode: 0o700 });
    await writeFile(join(s.stateDir, network), 'not a directory');
    const add = await call('ADD');
    expect([103, 5]).toContain(add.json?.code);
    expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
  });
});

describe.skipIf(!haveRoot)('a full or read-only disk under the state dir or the log', () => {
  const mounts: string[] = [];
  afterEach(async () => {
    for (const m of mounts.splice(0).reverse()) await execa('umount', ['-l', m], { reject: false });
  });
  /** A small tmpfs at `dir` (removed by afterEach), filled to the last block when `full`. */
  async function tmpfs(dir: string, opts: { full?: boolean } = {}): Promise<void> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await execa('mount', ['-t', 'tmpfs', '-o', 'size=256k,mode=0700', 'tmpfs', dir]);
    mounts.push(dir);
    if (opts.full) await execa('dd', ['if=/dev/zero', `of=${join(dir, 'filler')}`, 'bs=4k'], { reject: false });
  }

  it('state dir on a full disk: ADD → 5 naming the ledger, nothing allocated; DEL releases and succeeds, the record kept until there is room', async () => {
    await tmpfs(s.stateDir);
    expect((await call('ADD', 'old')).exitCode).toBe(0);
    await execa('dd', ['if=/dev/zero', `of=${join(s.stateDir, 'filler')}`, 'bs=4k'], { reject: false });

    const add = await call('ADD');
    expect(add.json, add.stdout).toMatchObject({ code: ErrorCode.IoFailure });
    expect(add.json.msg).toContain(join(s.stateDir, network));
    expect(add.json.details).toMatch(/ENOSPC/);
    expect([...(await hostLocalStore(s.dataDir, network)).values()]).toEqual(['old:eth0']);

    const del = await call('DEL', 'old');
    expect(del.exitCode, del.stdout).toBe(0);
    expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
    expect([...(await readLedger(s.stateDir, network)).records.keys()]).toEqual(['old:eth0']);
    expect(await logLine(/cannot write the ledger/)).toMatchObject({ code: ErrorCode.IoFailure });
    // No empty lock file left for the next caller to wait out.
    expect((await readLedger(s.stateDir, network)).lockPresent).toBe(false);

    // Room again: GC (the attachment is in no valid list, its netns is gone) forgets the record.
    await execa('rm', ['-f', join(s.stateDir, 'filler')]);
    const gc = await call('GC', '', { 'cni.dev/valid-attachments': [] });
    expect(gc.exitCode, gc.stdout).toBe(0);
    expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
    expect([...(await readLedger(s.stateDir, network)).records.keys()]).toEqual([]);
  });

  it('state dir on a read-only file system: DEL releases the address and succeeds (a retry could not help), the record left for GC', async () => {
    await tmpfs(s.stateDir);
    expect((await call('ADD', 'old')).exitCode).toBe(0);
    await execa('mount', ['-o', 'remount,ro', s.stateDir]);
    const del = await call('DEL', 'old');
    expect(del.exitCode, del.stdout).toBe(0);
    expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
    expect([...(await readLedger(s.stateDir, network)).records.keys()]).toEqual(['old:eth0']);
    expect(await logLine(/cannot write the ledger/)).toMatchObject({ code: ErrorCode.IoFailure, details: expect.stringMatching(/EROFS/) });
    // Retried, it answers the same: nothing is released twice, nothing fails.
    expect((await call('DEL', 'old')).exitCode).toBe(0);
  });

  it('state dir on a read-only file system: ADD → 5, nothing allocated; STATUS → 50', async () => {
    await tmpfs(s.stateDir);
    expect((await call('ADD', 'old')).exitCode).toBe(0);
    await execa('mount', ['-o', 'remount,ro', s.stateDir]);
    const add = await call('ADD');
    expect(add.json, add.stdout).toMatchObject({ code: ErrorCode.IoFailure });
    expect(add.json.details).toMatch(/EROFS/);
    expect([...(await hostLocalStore(s.dataDir, network)).values()]).toEqual(['old:eth0']);
    expect((await call('STATUS')).json).toMatchObject({ code: ErrorCode.PluginNotAvailable });
  });

  it('log file on a full disk: every verb still answers correctly (the log line is lost, not the call)', async () => {
    await tmpfs(join(s.dir, 'logs'), { full: true });
    const add = await call('ADD');
    expect(add.exitCode, add.stdout + add.stderr).toBe(0);
    expect(add.json.ips).toHaveLength(1);
    expect((await call('CHECK', 'pod-1', { prevResult: add.json })).exitCode).toBe(0);
    expect((await call('DEL')).exitCode).toBe(0);
    expect((await call('ADD', 'bad/id')).json).toMatchObject({ code: ErrorCode.InvalidEnvironment });
    expect(await hostLocalStore(s.dataDir, network)).toEqual(new Map());
  });
});
