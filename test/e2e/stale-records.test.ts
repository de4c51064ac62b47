// A dead pod's record must not wedge its address: the BUILT plugin, chained, with a ledger record for an address
// the runtime's IPAM hands out again (what a lowest-free allocator does after a pod vanished without a DEL, e.g.
// across a power loss). GC's rule decides (src/gc/stale.ts): a holder whose netns is gone, or exists and holds none
// of its addresses, gives the address up (its record forgotten, or kept for its other addresses) and the ADD
// succeeds, logged and counted; a holder whose netns holds the address, or cannot be looked into, keeps it (11).
import { execa } from 'execa';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { invoke, ledgerRecords, scratch } from '../helpers/cni.js';
import { shimConf } from '../helpers/shim-conf.js';
import { inNs, rootOrSkip, TestNet } from '../helpers/netns.js';
import { parseMetrics, seriesKey } from '../../src/metrics.js';
import { ErrorCode } from '../../src/cni/errors.js';

const NET = 'stale';

describe.skipIf(!rootOrSkip())("a provably dead pod's record never wedges its address", () => {
  const net = new TestNet();
  let s: Awaited<ReturnType<typeof scratch>>;
  beforeEach(async () => {
    s = await scratch();
  });
  afterEach(async () => {
    await net.cleanup();
    await s.cleanup();
  });

  const metricsFile = () => join(s.dir, 'shim.prom');
  const conf = (...addresses: string[]) =>
    shimConf({
      placement: 'chained',
      name: NET,
      dirs: s,
      probeRewrite: false,
      keys: { residue: { ebtables: false, neigh: false }, metricsFile: metricsFile() },
      top: { prevResult: { cniVersion: '1.0.0', ips: addresses.map((address) => ({ address })) } },
    });
  const add = (cid: string, netns: string, ...addresses: string[]) =>
    invoke(conf(...addresses), { command: 'ADD', containerID: cid, netns, ifname: 'eth0' });
  const record = async (cid: string) =>
    JSON.parse(await readFile(join(s.stateDir, NET, 'records', `${cid}:eth0.json`), 'utf8')) as { ips: string[]; note?: string };
  const taken = async () =>
    parseMetrics(await readFile(metricsFile(), 'utf8')).get(seriesKey('ipam_shim_stale_records_taken_total', { network: NET }))?.value;

  it('netns gone: the next pod given the address is attached and the dead record forgotten (logged, counted)', async () => {
    const dead = await net.netns('dead');
    expect((await add('pod-dead', `/run/netns/${dead}`, '10.77.0.5/24')).exitCode).toBe(0);
    await execa('ip', ['netns', 'del', dead]); // the sandbox went without a DEL
    const fresh = await net.netns('fresh');
    const out = await add('pod-new', `/run/netns/${fresh}`, '10.77.0.5/24');
    expect(out.exitCode, out.stdout).toBe(0);
    expect(await ledgerRecords(s.stateDir, NET)).toEqual(['pod-new:eth0.json']);
    expect((await record('pod-new')).ips).toEqual(['10.77.0.5']);
    const log = (await readFile(s.logFile, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(log.find((l) => /provably gone/.test(l.msg))).toMatchObject({
      ip: '10.77.0.5',
      outcome: 'forgotten',
      holder: { containerID: 'pod-dead' },
    });
    expect(await taken()).toBe(1);
  });

  it('netns there but holding none of its addresses: dead too; a dual-stack holder keeps its other address for GC', async () => {
    const empty = await net.netns('empty');
    expect((await add('pod-old', `/run/netns/${empty}`, '10.77.0.6/24', 'fd00:77::6/64')).exitCode).toBe(0);
    const out = await add('pod-new', '/run/netns/whatever', '10.77.0.6/24');
    expect(out.exitCode, out.stdout).toBe(0);
    const old = await record('pod-old');
    expect(old.ips).toEqual(['fd00:77::6']);
    expect(old.note).toContain('pod-new');
    expect((await record('pod-new')).ips).toEqual(['10.77.0.6']);
  });

  it('a live holder (its netns holds the address) keeps it: 11, both records as they were; so does one that cannot be looked into', async () => {
    const live = await net.netns('live');
    await inNs(live, 'ip', ['addr', 'add', '10.77.0.7/24', 'dev', 'lo']);
    expect((await add('pod-live', `/run/netns/${live}`, '10.77.0.7/24')).exitCode).toBe(0);
    const out = await add('pod-new', '/run/netns/whatever', '10.77.0.7/24');
    expect(out.json, out.stdout).toMatchObject({ code: ErrorCode.TryAgainLater });
    expect(await ledgerRecords(s.stateDir, NET)).toEqual(['pod-live:eth0.json']);

    // A netns path whose directory this process cannot see proves nothing: kept.
    expect((await add('pod-unseen', '/run/ipam-shim-no-such-dir/ns', '10.77.0.8/24')).exitCode).toBe(0);
    expect((await add('pod-new', '/run/netns/whatever', '10.77.0.8/24')).json).toMatchObject({ code: ErrorCode.TryAgainLater });
    expect(await ledgerRecords(s.stateDir, NET)).toEqual(['pod-live:eth0.json', 'pod-unseen:eth0.json']);
    expect(await taken()).toBe(0);
  });
});
