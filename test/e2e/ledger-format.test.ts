// The ledger's format across upgrades and downgrades (docs/upgrade.md). test/fixtures/ledger/v1 is a ledger in
// today's format (`"v":1`), as this version writes it: it must read, through the library and the built executable,
// for as long as the format is supported. test/fixtures/ledger/v2 holds a record of a newer format (what a
// downgrade leaves): every path refuses it with 103, and nothing rewrites, removes or re-indexes it.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chmod, cp, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode } from '../../src/cni/errors.js';
import { Ledger } from '../../src/effects/ledger.js';
import { LEDGER_FORMAT, type LedgerRecord, NewerLedgerFormatError } from '../../src/ledger/record.js';
import { FIXTURE_BIN, ROOT, SEA_SHIM, invoke } from '../support/shim/cni.js';

const FIXTURES = join(ROOT, 'test/fixtures/ledger');
const POD = { containerID: '4f1c9a7e2b6d8f00a1b2c3d4e5f60718293a4b5c6d7e8f9011223344556677', ifname: 'eth0' };
const NEWER = { containerID: '7a3c0e91d2b4f5a6', ifname: 'eth0' };

let dir = '';
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ipam-shim-ledger-format-'));
});
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A copy of a fixture ledger as the state dir (private, as the ledger insists: git does not keep modes). */
async function stateDirFrom(fixture: 'v1' | 'v2'): Promise<string> {
  const stateDir = join(dir, 'state');
  await cp(join(FIXTURES, fixture), stateDir, { recursive: true });
  for (const d of [stateDir, join(stateDir, 'cilium'), join(stateDir, 'cilium/records'), join(stateDir, 'cilium/ips')]) await chmod(d, 0o700);
  return stateDir;
}

/** Every file of the network's ledger with its bytes. */
async function snapshot(stateDir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const sub of ['records', 'ips']) {
    for (const n of await readdir(join(stateDir, 'cilium', sub))) out[`${sub}/${n}`] = await readFile(join(stateDir, 'cilium', sub, n), 'utf8');
  }
  return out;
}

/** The chained entry's DEL or GC through the built single executable (chained: no netns needed for either). */
const call = (stateDir: string, command: 'DEL' | 'GC', extra: Record<string, unknown> = {}, att: { containerID: string; ifname: string } = POD) =>
  invoke(
    { cniVersion: '1.1.0', name: 'cilium', type: 'ipam-shim', stateDir, logFile: join(dir, 'shim.log'), delegate: { type: 'fake-ipam' }, ...extra },
    {
      command,
      containerID: command === 'DEL' ? att.containerID : '',
      ifname: command === 'DEL' ? att.ifname : '',
      path: [FIXTURE_BIN],
      env: { FAKE_IPAM_LOG: join(dir, 'fake.log') },
      bin: SEA_SHIM,
    },
  );

describe(`a ledger in today's format (v${LEDGER_FORMAT})`, () => {
  it('the fixture is what this version writes, byte for byte', async () => {
    const fresh = join(dir, 'fresh');
    const fixture = join(FIXTURES, 'v1/cilium/records');
    for (const name of await readdir(fixture)) {
      const rec = JSON.parse(await readFile(join(fixture, name), 'utf8')) as LedgerRecord;
      await new Ledger(fresh, 'cilium').put(rec);
    }
    expect(await snapshot(fresh)).toEqual(await snapshot(join(FIXTURES, 'v1')));
  });

  it('reads: every record, no corrupt file; the executable DELs one attachment and leaves the others as they were', async () => {
    const stateDir = await stateDirFrom('v1');
    const before = await snapshot(stateDir);
    const ledger = new Ledger(stateDir, 'cilium');
    const { records, corrupt } = await ledger.list();
    expect(corrupt).toEqual([]);
    expect(records.map((r) => [r.containerID, r.owner, r.state, r.ips])).toEqual([
      [POD.containerID, 'pod', 'attached', ['10.224.1.2', 'fd00:224::1:2']],
      ['9d0e55c1aa7f43b2', 'pod', 'intent', []],
      ['cilium-agent-health', 'agent', 'attached', ['10.224.1.3']],
    ]);
    expect(await ledger.get(POD)).toEqual(JSON.parse(before[`records/${POD.containerID}:eth0.json`]!));

    const del = await call(stateDir, 'DEL');
    expect(del.exitCode, del.stdout).toBe(0);
    const after = await snapshot(stateDir);
    // Chained, DEL marks the record (the main plugin's DEL comes after it and may fail; GC forgets it once the pod is
    // gone: docs/failure-model.md#chained-del-before-the-main-plugins-issue-41); nothing else is touched.
    const marked = `records/${POD.containerID}:eth0.json`;
    expect(Object.keys(after).sort()).toEqual(Object.keys(before).sort());
    for (const k of Object.keys(after)) if (k !== marked) expect(after[k], k).toBe(before[k]);
    const { deletedAt, updatedAt, ...rest } = JSON.parse(after[marked]!);
    const { updatedAt: _, ...was } = JSON.parse(before[marked]!);
    expect(rest).toEqual(was);
    expect(Date.parse(deletedAt)).toBe(Date.parse(updatedAt));
  });
});

describe('optional fields within format 1 (docs/upgrade.md: no `v` bump)', () => {
  it('a record with the pod and the netns identity (this version) and a field this version does not know (a later v1 writer) reads, and the executable DELs it', async () => {
    const stateDir = await stateDirFrom('v1');
    const ledger = new Ledger(stateDir, 'cilium');
    const att = { containerID: 'a0a1a2a3', ifname: 'eth0' };
    const pod = { namespace: 'shop', name: 'web-0', uid: '0f0e5a3c-7c1d-4b7e-9a51-3c7c2f0b6d11' };
    const rec: LedgerRecord = {
      v: 1,
      ...att,
      network: 'cilium',
      owner: 'pod',
      state: 'attached',
      placement: 'chained',
      ips: ['10.224.1.20'],
      netns: '/run/netns/x',
      createdAt: '2026-11-25T00:00:00.000Z',
      updatedAt: '2026-11-25T00:00:00.000Z',
      pod,
      netnsId: { dev: 4, ino: 4026532500, mntns: 4026531832, pidns: 4026531836 },
    };
    await ledger.put(rec);
    const path = join(stateDir, 'cilium/records', `${att.containerID}:eth0.json`);
    const written = JSON.parse(await readFile(path, 'utf8'));
    expect(written).toMatchObject({ v: 1, pod, netnsId: rec.netnsId });
    await writeFile(path, `${JSON.stringify({ ...written, laterField: { any: 'thing' } })}\n`);
    expect(await ledger.get(att)).toEqual(rec);
    expect((await ledger.list()).corrupt).toEqual([]);
    const del = await call(stateDir, 'DEL', {}, att);
    expect(del.exitCode, del.stdout).toBe(0);
    // Chained: marked, every field kept (the unknown one is dropped by the schema, as before).
    expect(await ledger.get(att)).toEqual({ ...rec, deletedAt: expect.any(String), updatedAt: expect.any(String) });
  });
});

describe('a record of a newer format (after a downgrade)', () => {
  it('is refused on every library path with 103, and nothing rewrites, removes or re-indexes it', async () => {
    const stateDir = await stateDirFrom('v2');
    const before = await snapshot(stateDir);
    const ledger = new Ledger(stateDir, 'cilium');

    const got = await ledger.get(NEWER).catch((e: unknown) => e);
    expect(got).toBeInstanceOf(NewerLedgerFormatError);
    expect((got as NewerLedgerFormatError).code).toBe(ErrorCode.LedgerCorrupt);
    expect((got as NewerLedgerFormatError).msg).toMatch(/written by a newer ipam-shim \(format v2, this one reads v1\)/);

    // Listed as unreadable: GC releases nothing while it is there (docs/failure-model.md).
    const { records, corrupt } = await ledger.list();
    expect(records.map((r) => r.containerID)).toEqual(['cilium-agent-health']);
    expect(corrupt).toEqual([join(stateDir, 'cilium/records/7a3c0e91d2b4f5a6:eth0.json')]);

    // Not forgotten (it may hold what this version cannot undo), and its address is not handed to another record.
    await expect(ledger.remove(NEWER)).rejects.toBeInstanceOf(NewerLedgerFormatError);
    const other: LedgerRecord = {
      v: 1,
      containerID: 'b1b2b3b4',
      ifname: 'eth0',
      network: 'cilium',
      owner: 'pod',
      state: 'attached',
      placement: 'chained',
      ips: ['10.224.1.9'],
      netns: '',
      createdAt: '2026-11-25T00:00:00.000Z',
      updatedAt: '2026-11-25T00:00:00.000Z',
    };
    await expect(ledger.put(other)).rejects.toBeInstanceOf(NewerLedgerFormatError);
    expect(await snapshot(stateDir)).toEqual(before);

    // The rest of the ledger keeps working.
    await ledger.put({ ...other, ips: ['10.224.1.10'] });
    const after = await snapshot(stateDir);
    for (const k of Object.keys(before)) expect(after[k], k).toBe(before[k]);
  });

  it('the executable: DEL of it succeeds (the address is released) and keeps the record, logged with 103 (an upgrade reads it); GC refuses to release anything', async () => {
    const stateDir = await stateDirFrom('v2');
    const before = await snapshot(stateDir);
    const del = await call(stateDir, 'DEL', {}, NEWER);
    // A DEL that released the address never fails on the ledger (docs/failure-model.md): the record stays for later.
    expect(del.exitCode).toBe(0);
    const kept = (await readFile(join(dir, 'shim.log'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .find((l) => l.code === 103);
    expect(kept?.cniMsg).toMatch(/newer ipam-shim \(format v2/);
    expect(kept?.msg).toMatch(/the record stays for GC/);
    // GC with no valid attachment at all would release everything it can prove unused: it refuses instead.
    const gc = await call(stateDir, 'GC', { 'cni.dev/valid-attachments': [] });
    expect(gc.exitCode).toBe(1);
    expect(gc.json).toMatchObject({ code: ErrorCode.LedgerCorrupt, msg: 'ledger for network cilium has unreadable records; GC releases nothing' });
    expect(await snapshot(stateDir)).toEqual(before);
    // Nothing was released through the delegate either.
    const delegateCalls = await readFile(join(dir, 'fake.log'), 'utf8').catch(() => '');
    expect(delegateCalls.split('\n').filter((l) => l.startsWith('DEL') || l.startsWith('GC'))).toEqual([]);
  });
});
