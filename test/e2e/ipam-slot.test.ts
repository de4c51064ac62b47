// The shim in the IPAM slot over Debian's host-local, invoked as a runtime (or a main plugin) would,
// at every spec version: ADD → CHECK → DEL, version bridging for 1.1.0, STATUS.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hostLocalAllocations, invoke, ledgerRecords, scratch } from '../support/shim/cni.js';
import { hostLocal, shimConf } from '../support/shim/conf.js';
import { ErrorCode } from '../../src/cni/errors.js';

let s: Awaited<ReturnType<typeof scratch>>;
beforeEach(async () => {
  s = await scratch();
});
afterEach(async () => {
  await s.cleanup();
});

// These run in the host's namespace: the probe rewrite would install a table on the host (tested in netns elsewhere).
const conf = (cniVersion: string) =>
  shimConf({ cniVersion, name: 'slotnet', dirs: s, probeRewrite: false, delegate: hostLocal(s.dataDir, '10.97.0.0/24', 'fd00:97::/120') });
const env = (command: string, containerID = 'pod-a') => ({ command, containerID, netns: '/var/run/netns/pod-a', ifname: 'eth0' });

describe.each(['0.3.1', '0.4.0', '1.0.0', '1.1.0'])('IPAM slot at %s', (v) => {
  it('ADD returns the delegate result in the config version, CHECK passes, DEL releases everything', async () => {
    const added = await invoke(conf(v), env('ADD'));
    expect(added.exitCode, added.stdout).toBe(0);
    expect(added.json.cniVersion).toBe(v);
    expect(added.json.ips).toHaveLength(2);
    const pre1 = v.startsWith('0.');
    for (const ip of added.json.ips) expect(ip.version).toBe(pre1 ? (ip.address.includes(':') ? '6' : '4') : undefined);
    expect(await hostLocalAllocations(s.dataDir, 'slotnet')).toEqual(['10.97.0.2', 'fd00:97::2']);
    expect(await ledgerRecords(s.stateDir, 'slotnet')).toEqual(['pod-a:eth0.json']);

    if (v !== '0.3.1') {
      const checked = await invoke({ ...conf(v), prevResult: added.json }, env('CHECK'));
      expect(checked.exitCode, checked.stdout).toBe(0);
      expect(checked.stdout).toBe('');
    }
    const del = await invoke({ ...conf(v), prevResult: added.json }, env('DEL'));
    expect(del.exitCode, del.stdout).toBe(0);
    expect(del.stdout).toBe('');
    expect(await hostLocalAllocations(s.dataDir, 'slotnet')).toEqual([]);
    expect(await ledgerRecords(s.stateDir, 'slotnet')).toEqual([]);
    // DEL is idempotent, with or without prevResult.
    expect((await invoke(conf(v), env('DEL'))).exitCode).toBe(0);
  });
});

describe('version bridging and STATUS', () => {
  it('a 1.1.0 config over host-local 1.1.1 (≤ 1.0.0) is spoken to at 1.0.0 and answered at 1.1.0', async () => {
    const added = await invoke(conf('1.1.0'), env('ADD', 'pod-b'));
    expect(added.exitCode, added.stdout).toBe(0);
    expect(added.json.cniVersion).toBe('1.1.0');
  });
  it('STATUS at 1.1.0 succeeds silently when the delegate answers and the state dir is writable', async () => {
    const out = await invoke(conf('1.1.0'), { command: 'STATUS', path: ['/usr/lib/cni'] });
    expect(out.exitCode, out.stdout).toBe(0);
    expect(out.stdout).toBe('');
  });
  it('STATUS says 50 when the delegate is missing', async () => {
    const c = conf('1.1.0');
    c.ipam.delegate.type = 'azure-ipam';
    const out = await invoke(c, { command: 'STATUS', path: ['/usr/lib/cni'] });
    expect(out.exitCode).not.toBe(0);
    expect(out.json).toMatchObject({ code: ErrorCode.PluginNotAvailable });
  });
  it('CHECK fails for an attachment the shim never recorded', async () => {
    const out = await invoke(conf('1.0.0'), env('CHECK', 'ghost'));
    expect(out.json).toMatchObject({ code: ErrorCode.UnknownContainer });
  });
  it('two attachments get distinct addresses and separate records', async () => {
    const a = await invoke(conf('1.0.0'), env('ADD', 'pod-c'));
    const b = await invoke(conf('1.0.0'), env('ADD', 'pod-d'));
    expect(a.json.ips[0].address).not.toBe(b.json.ips[0].address);
    expect(await ledgerRecords(s.stateDir, 'slotnet')).toEqual(['pod-c:eth0.json', 'pod-d:eth0.json']);
  });
});
