// runGc's releases against a real ledger in a temp dir (no delegate, no root): each release takes the
// attachment's lock, and releases only the record it planned.
import { mkdtemp, rm, unlink, writeFile, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ShimSettingsSchema, type NetConf } from '../../src/cni/config.js';
import { Ledger } from '../../src/effects/ledger.js';
import { run } from '../../src/effects/exec.js';
import { silentLogger } from '../../src/log.js';
import { runGc } from '../../src/gc/run-gc.js';
import { podRecord } from '../support/doubles/ledger-record.js';

let dir: string | undefined;
afterEach(async () => dir && rm(dir, { recursive: true, force: true }));

const old = new Date(Date.now() - 86_400_000).toISOString();
const rec = (containerID: string, ip: string) => podRecord(containerID, ip, old);

async function world() {
  dir = await mkdtemp(join(tmpdir(), 'run-gc-lock-'));
  const settings = ShimSettingsSchema.parse({ stateDir: join(dir, 'state') });
  const conf = { raw: {}, cniVersion: '1.0.0', name: 'net', placement: 'chained', settings, prevResult: undefined, validAttachments: [] } as NetConf;
  const ledger = await new Ledger(settings.stateDir, 'net').open();
  await ledger.put(rec('leak-a', '10.0.0.1'));
  await ledger.put(rec('leak-b', '10.0.0.2'));
  const gc = (lockWaitMs: number) =>
    runGc({ conf, ledger, delegate: undefined, run, log: silentLogger, valid: [], apply: true, graceMs: 0, forward: false, lockWaitMs });
  const stat = await readFile('/proc/self/stat', 'utf8');
  const holder = `${process.pid} ${stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]}`;
  const lockOf = (cid: string) => join(ledger.dir, `.attach-${cid}:eth0.lock`);
  return { ledger, gc, holder, lockOf };
}

describe('runGc releases under the attachment lock', () => {
  it('leaves an attachment whose lock a live CNI call holds (busy), releases the others', async () => {
    const w = await world();
    await writeFile(w.lockOf('leak-a'), w.holder);
    const report = await w.gc(200);
    expect(report.released).toEqual([{ containerID: 'leak-b', ifname: 'eth0' }]);
    expect(report.skipped).toEqual([{ containerID: 'leak-a', ifname: 'eth0', why: 'busy' }]);
    expect(report.errors).toEqual([]);
    expect(await w.ledger.get({ containerID: 'leak-a', ifname: 'eth0' })).toBeDefined();
  });

  it('leaves a record re-written while it waited for the lock (changed)', async () => {
    const w = await world();
    await writeFile(w.lockOf('leak-a'), w.holder);
    const running = w.gc(5_000);
    // The lock holder (an ADD reusing the ID) records the attachment anew, then lets go.
    await new Promise((r) => setTimeout(r, 100));
    await w.ledger.put({ ...rec('leak-a', '10.0.0.1'), updatedAt: new Date().toISOString() });
    await unlink(w.lockOf('leak-a'));
    const report = await running;
    expect(report.skipped).toEqual([{ containerID: 'leak-a', ifname: 'eth0', why: 'changed' }]);
    expect(report.released).toEqual([{ containerID: 'leak-b', ifname: 'eth0' }]);
    expect(await w.ledger.get({ containerID: 'leak-a', ifname: 'eth0' })).toBeDefined();
  });
});
