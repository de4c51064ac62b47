// What a power loss can leave of a write that was not fsynced (docs/failure-model.md "Durability"): a file that
// exists but holds 0 bytes. Against a real ledger in a temp dir (no root): an empty record reads as corrupt (GC
// releases nothing), an empty IP index entry as no holder, an empty VERSION cache as a miss; none of them is ever
// a reason to release an address.
import { podRecord } from '../support/doubles/ledger-record.js';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ShimSettingsSchema, type NetConf } from '../../src/cni/config.js';
import { ErrorCode } from '../../src/cni/errors.js';
import { Delegate } from '../../src/effects/delegate.js';
import { run, runElsewhere } from '../../src/effects/exec.js';
import { Ledger } from '../../src/effects/ledger.js';
import type { LedgerRecord } from '../../src/ledger/record.js';
import { silentLogger } from '../../src/log.js';
import { runGc } from '../../src/gc/run-gc.js';

let dir: string | undefined;
afterEach(async () => dir && rm(dir, { recursive: true, force: true }));

const old = new Date(Date.now() - 86_400_000).toISOString();
const rec = (containerID: string, ...ips: string[]): LedgerRecord => ({ ...podRecord(containerID, ips[0]!, old), ips });
const att = (containerID: string) => ({ containerID, ifname: 'eth0' });

async function world() {
  dir = await mkdtemp(join(tmpdir(), 'empty-files-'));
  const settings = ShimSettingsSchema.parse({ stateDir: join(dir, 'state') });
  const conf = { raw: {}, cniVersion: '1.0.0', name: 'net', placement: 'chained', settings, prevResult: undefined, validAttachments: [] } as NetConf;
  const ledger = await new Ledger(settings.stateDir, 'net').open();
  const gc = () => runGc({ conf, ledger, delegate: undefined, run, log: silentLogger, valid: [], apply: true, graceMs: 0, forward: false });
  return { dir, stateDir: settings.stateDir, ledger, gc, records: join(ledger.dir, 'records'), ips: join(ledger.dir, 'ips') };
}

describe('a record file of 0 bytes', () => {
  it('is listed as corrupt and read as 103; GC releases nothing, not even the records it could', async () => {
    const w = await world();
    await w.ledger.put(rec('leak', '10.0.0.1'));
    await writeFile(join(w.records, 'empty:eth0.json'), '');
    const listing = await w.ledger.list();
    expect(listing.corrupt).toEqual([join(w.records, 'empty:eth0.json')]);
    expect(listing.records.map((r) => r.containerID)).toEqual(['leak']);
    await expect(w.ledger.get(att('empty'))).rejects.toMatchObject({ code: ErrorCode.LedgerCorrupt });
    await expect(w.gc()).rejects.toMatchObject({ code: ErrorCode.LedgerCorrupt });
    expect(await w.ledger.get(att('leak'))).toMatchObject({ ips: ['10.0.0.1'] });
  });

  it("is forgotten by its attachment's DEL (remove), after which GC goes on", async () => {
    const w = await world();
    await w.ledger.put(rec('leak', '10.0.0.1'));
    await writeFile(join(w.records, 'empty:eth0.json'), '');
    expect(await w.ledger.remove(att('empty'))).toBeUndefined();
    expect((await w.ledger.list()).corrupt).toEqual([]);
    expect((await w.gc()).released).toEqual([att('leak')]);
  });
});

describe('an IP index entry of 0 bytes', () => {
  it('names no holder: a record claiming the IP is accepted and the entry rewritten; get and list are unaffected', async () => {
    const w = await world();
    await w.ledger.put(rec('other', '10.0.0.1'));
    await writeFile(join(w.ips, '10.0.0.2'), '');
    await writeFile(join(w.ips, 'fd00__2'), '');
    expect((await w.ledger.list()).corrupt).toEqual([]);
    await w.ledger.put(rec('new', '10.0.0.2', 'fd00::2'));
    expect(await readFile(join(w.ips, '10.0.0.2'), 'utf8')).toBe('new:eth0');
    expect(await readFile(join(w.ips, 'fd00__2'), 'utf8')).toBe('new:eth0');
    // The index still refuses a second holder once it names one.
    await expect(w.ledger.put(rec('third', '10.0.0.2'))).rejects.toMatchObject({ code: ErrorCode.TryAgainLater });
  });

  it('is left alone by a remove that does not own it, and blocks nothing after', async () => {
    const w = await world();
    await w.ledger.put(rec('gone', '10.0.0.3'));
    await writeFile(join(w.ips, '10.0.0.3'), '');
    expect(await w.ledger.remove(att('gone'))).toMatchObject({ ips: ['10.0.0.3'] });
    await w.ledger.put(rec('next', '10.0.0.3'));
    expect(await readFile(join(w.ips, '10.0.0.3'), 'utf8')).toBe('next:eth0');
  });
});

describe('a delegate VERSION cache of 0 bytes', () => {
  it('is a miss: the delegate is asked again and the cache written anew', async () => {
    const w = await world();
    const bin = join(w.dir, 'bin');
    await mkdir(bin);
    await writeFile(join(bin, 'fake-ipam'), '#!/bin/sh\n');
    await chmod(join(bin, 'fake-ipam'), 0o755);
    let versionCalls = 0;
    const fakeRun = runElsewhere(async () => {
      versionCalls++;
      return {
        stdout: JSON.stringify({ cniVersion: '1.0.0', supportedVersions: ['0.4.0', '1.0.0'] }),
        stderr: '',
        exitCode: 0,
        timedOut: false,
        notFound: false,
      };
    });
    const cacheDir = join(w.stateDir, '.delegate-versions');
    const delegate = () => new Delegate({ type: 'fake-ipam', cniPath: [bin], env: {}, timeoutMs: 5_000, log: silentLogger, cacheDir, run: fakeRun });
    expect(await delegate().supportedVersions()).toEqual(['0.4.0', '1.0.0']);
    expect(await delegate().supportedVersions()).toEqual(['0.4.0', '1.0.0']);
    expect(versionCalls).toBe(1); // cached
    await writeFile(join(cacheDir, 'fake-ipam.json'), '');
    expect(await delegate().supportedVersions()).toEqual(['0.4.0', '1.0.0']);
    expect(versionCalls).toBe(2);
    expect((await stat(join(cacheDir, 'fake-ipam.json'))).size).toBeGreaterThan(0);
  });
});
