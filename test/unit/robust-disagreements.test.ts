// The robustness suites' judge (test/support/shim/robust.ts) on a ledger the shim's own code wrote: what the shim
// keeps in a network's directory besides records and the index is not a stray file. Real files in a temp dir (no
// root), written by the real Ledger and the real STATUS memo.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/effects/ledger.js';
import { writeMemo } from '../../src/status/memo.js';
import { podRecord } from '../support/doubles/ledger-record.js';
import { disagreements, hostLocalStore, readLedger } from '../support/shim/robust.js';

let dir = '';
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ipam-shim-robust-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

/** One attached pod in the ledger (state dir `state`, network `net`) and in host-local's store (`host-local`). */
async function onePod(): Promise<{ stateDir: string; dataDir: string; ledger: Ledger }> {
  const stateDir = join(dir, 'state');
  const dataDir = join(dir, 'host-local');
  const ledger = await new Ledger(stateDir, 'net').open();
  await ledger.put(podRecord('pod-1', '10.240.0.32'));
  await mkdir(join(dataDir, 'net'), { recursive: true });
  await writeFile(join(dataDir, 'net', '10.240.0.32'), 'pod-1\r\neth0');
  return { stateDir, dataDir, ledger };
}

describe('disagreements() between a ledger and host-local on disk', () => {
  it('agree: one pod recorded and reserved', async () => {
    const { stateDir, dataDir } = await onePod();
    expect(disagreements(await readLedger(stateDir, 'net'), await hostLocalStore(dataDir, 'net'))).toEqual([]);
  });

  it("the STATUS verb's memo (.status.json, src/status/memo.ts) is the shim's own file, not a stray", async () => {
    const { stateDir, dataDir, ledger } = await onePod();
    await writeMemo(ledger.dir, { healthySince: Date.now() });
    expect(disagreements(await readLedger(stateDir, 'net'), await hostLocalStore(dataDir, 'net'))).toEqual([]);
  });

  it('a file the shim does not write there is still a stray', async () => {
    const { stateDir, dataDir, ledger } = await onePod();
    await writeFile(join(ledger.dir, 'status.json'), '{}');
    expect(disagreements(await readLedger(stateDir, 'net'), await hostLocalStore(dataDir, 'net'))).toEqual([
      `stray file: ${join(ledger.dir, 'status.json')}`,
    ]);
  });
});
