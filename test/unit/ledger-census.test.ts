// The metrics' ledger census reads a record as every ledger reader does (src/ledger/record.ts parseLedgerRecord):
// a file list() cannot take as a record is never counted by the census as whatever it holds.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CniError, ErrorCode } from '../../src/cni/errors.js';
import { Ledger } from '../../src/effects/ledger.js';
import { podRecord } from '../support/doubles/ledger-record.js';

let dir: string | undefined;
afterEach(async () => dir && rm(dir, { recursive: true, force: true }));

const isAgent = (containerID: string) => containerID.startsWith('cilium-agent-');

describe('the ledger census and list() read one record alike', () => {
  it('a record list() counts is counted; one it calls corrupt fails the census (code 103), never counted', async () => {
    dir = await mkdtemp(join(tmpdir(), 'ledger-census-'));
    const ledger = await new Ledger(join(dir, 'state'), 'net').open();
    await ledger.put({ ...podRecord('cilium-agent-n1', '10.0.0.1', new Date().toISOString()), owner: 'agent' });
    expect((await ledger.list()).records.map((r) => r.ips)).toEqual([['10.0.0.1']]);
    expect(await ledger.census(isAgent)).toEqual({ attachments: 1, agentIps: 1 });

    // JSON with addresses, but no record (no format, attachment or state): list() leaves it out as corrupt.
    await writeFile(join(ledger.dir, 'records', 'cilium-agent-n2:eth0.json'), JSON.stringify({ ips: ['10.0.0.2', '10.0.0.3'] }));
    const listing = await ledger.list();
    expect(listing.records).toHaveLength(1);
    expect(listing.corrupt).toHaveLength(1);
    const census = await ledger.census(isAgent).catch((e: unknown) => e);
    expect(census).toBeInstanceOf(CniError);
    expect(census).toMatchObject({ code: ErrorCode.LedgerCorrupt });
  });
});
