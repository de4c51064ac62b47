// One rule for address notation, through the BUILT plugin and CLI (src/net/ip.ts): an IPv4-mapped IPv6 address
// (`::ffff:10.224.0.9`) is refused wherever an address comes in — a chained prevResult (7), a delegate's result
// (101, its allocation released), reservedCIDRs (7), `residue --ip` (usage, 2) — and an address is recorded in one
// canonical text, so the ledger's index sees `FD00:0::5` and `fd00::5` as the one address they are. Go's netlink
// configures a mapped address as the IPv4 address it maps, so letting it through as "IPv6" let a pod get
// 10.224.0.9 inside the reserved 10.224.0.0/24. Runs in the host's namespace with residue and probe steps off:
// nothing here touches the node.
import { execa } from 'execa';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { invoke, ledgerRecords, scratch, SHIM } from '../support/shim/cni.js';
import { shimConf } from '../support/shim/conf.js';

let s: Awaited<ReturnType<typeof scratch>>;
beforeEach(async () => {
  s = await scratch();
});
afterEach(() => s.cleanup());

const OFF = { residue: { ebtables: false, neigh: false } };
const MAPPED = '::ffff:10.224.0.9/24';

const chained = (name: string, address: string, keys: Record<string, unknown> = {}) =>
  shimConf({
    placement: 'chained',
    name,
    dirs: s,
    probeRewrite: false,
    keys: { ...OFF, ...keys },
    top: { prevResult: { cniVersion: '1.0.0', ips: [{ address }] } },
  });
/** A netns path whose directory does not exist: liveness unknown, so a holder recorded with it is kept (src/gc/stale.ts). */
const add = (cid: string) => ({ command: 'ADD', containerID: cid, netns: '/run/ipam-shim-no-such-dir/none', ifname: 'eth0' });

function expectCode(out: Awaited<ReturnType<typeof invoke>>, code: number): void {
  expect(out.exitCode, out.stdout + out.stderr).not.toBe(0);
  expect(out.stdout.trim().split('\n')).toHaveLength(1);
  expect(out.json, out.stdout).toMatchObject({ code, cniVersion: '1.0.0' });
}

describe('IPv4-mapped IPv6 addresses are refused wherever an address comes in', () => {
  it('chained: a prevResult with ::ffff:10.224.0.9 is refused (7) with or without a reserved 10.224.0.0/24; nothing recorded', async () => {
    for (const keys of [{ reservedCIDRs: ['10.224.0.0/24'] }, {}]) {
      const out = await invoke(chained('mapped', MAPPED, keys), add('pod-1'));
      expectCode(out, 7);
      expect(out.json.msg).toContain('IPv4-mapped');
      expect(out.json.details).toContain('10.224.0.9');
    }
    expect(await ledgerRecords(s.stateDir, 'mapped')).toEqual([]);
    // The same address written as IPv4 meets the reserved CIDR (100): the rule keeps nothing else from working.
    expectCode(await invoke(chained('mapped', '10.224.0.9/24', { reservedCIDRs: ['10.224.0.0/24'] }), add('pod-1')), 100);
    expect((await invoke(chained('mapped', '10.224.1.9/24', { reservedCIDRs: ['10.224.0.0/24'] }), add('pod-1'))).exitCode).toBe(0);
  });

  it('IPAM slot: a delegate that answers ::ffff:10.224.0.9 fails the ADD with 101, and its allocation is DELed', async () => {
    const bin = join(s.dir, 'bin');
    await mkdir(bin);
    const calls = join(s.dir, 'calls');
    // A stand-in IPAM plugin: VERSION, ADD answering a mapped address, DEL recorded.
    await writeFile(
      join(bin, 'mapped-ipam'),
      `#!/bin/bash
cat >/dev/null
echo "$CNI_COMMAND" >> ${JSON.stringify(calls)}
case "$CNI_COMMAND" in
  VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
  ADD) echo '{"cniVersion":"1.0.0","ips":[{"address":"${MAPPED}","gateway":"10.224.0.1"}]}' ;;
esac
`,
    );
    await chmod(join(bin, 'mapped-ipam'), 0o755);
    const conf = shimConf({
      name: 'mapslot',
      dirs: s,
      probeRewrite: false,
      delegate: { type: 'mapped-ipam' },
      keys: { ...OFF, reservedCIDRs: ['10.224.0.0/24'] },
    });
    const out = await invoke(conf, { ...add('pod-1'), path: [bin] });
    expectCode(out, 101);
    expect(out.json.msg).toContain('IPv4-mapped');
    expect((await readFile(calls, 'utf8')).trim().split('\n')).toEqual(['VERSION', 'ADD', 'DEL']);
    expect(await ledgerRecords(s.stateDir, 'mapslot')).toEqual([]);
  });

  it('reservedCIDRs: a mapped entry is refused (7) naming it, before anything is recorded', async () => {
    const out = await invoke(chained('mapres', '10.224.0.9/24', { reservedCIDRs: ['10.1.0.0/16', '::ffff:10.224.0.0/120'] }), add('pod-1'));
    expectCode(out, 7);
    expect(out.json.details).toContain('::ffff:10.224.0.0/120');
    expect(out.json.details).toContain('IPv4-mapped');
    expect(await ledgerRecords(s.stateDir, 'mapres')).toEqual([]);
  });

  it('`residue scan|clean --ip ::ffff:…` is a usage error naming the IPv4 address to give instead', async () => {
    for (const mode of ['scan', 'clean']) {
      const r = await execa(SHIM, ['residue', mode, '--ip', '::ffff:10.224.0.9'], { reject: false });
      expect(r.exitCode, r.stdout + r.stderr).toBe(2);
      expect(r.stderr).toContain('IPv4-mapped');
      expect(r.stderr).toContain('10.224.0.9');
    }
  });
});

describe('one address, one text', () => {
  it('chained: FD00:0::5 and fd00::5 are one address: the second attachment is refused (11), the record holds RFC 5952 text', async () => {
    const first = await invoke(chained('canon', 'FD00:0:0::5/64'), add('pod-1'));
    expect(first.exitCode, first.stdout).toBe(0);
    const rec = JSON.parse(await readFile(join(s.stateDir, 'canon', 'records', 'pod-1:eth0.json'), 'utf8'));
    expect(rec.ips).toEqual(['fd00::5']);
    const second = await invoke(chained('canon', 'fd00::5/64'), add('pod-2'));
    expectCode(second, 11);
    expect(await ledgerRecords(s.stateDir, 'canon')).toEqual(['pod-1:eth0.json']);
  });
});
