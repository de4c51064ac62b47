// One uplink per node (issue 25): on a dual-stack node whose IPv4 default route leaves by one interface and whose
// IPv6 default route leaves by another, every caller that names the uplink (doctor's reserved-routes check,
// `probe-rewrite status` and doctor's ipv6-probe check, the probe rewrite ADD ensures, `probe-rewrite ensure`)
// must name the same one. The BUILT executable, run inside a throwaway node netns with two veth uplinks.
import { execa } from 'execa';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { invoke, scratch, SHIM } from '../support/shim/cni.js';
import { inNs, rootOrSkip, TestNet } from '../support/net/netns.js';
import { hostLocal, shimConf } from '../support/shim/conf.js';

const root = rootOrSkip();
const V4 = 'upfour0';
const V6 = 'upsix0';

let s: Awaited<ReturnType<typeof scratch>>;
let net: TestNet;
let node: string;

async function shim(...args: string[]) {
  const r = await execa('ip', ['netns', 'exec', node, SHIM, ...args], {
    reject: false,
    env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' },
    extendEnv: false,
  });
  return { ...r, json: r.stdout.startsWith('{') ? JSON.parse(r.stdout) : undefined };
}

/** The interface the installed probe table's rules name (every `iifname`/`oifname` in it), from nft itself. */
async function tableUplinks(): Promise<string[]> {
  const { stdout } = await inNs(node, 'nft', ['list', 'table', 'ip6', 'azureSLBProbe']);
  return [...new Set([...stdout.matchAll(/[io]ifname "([^"]+)"/g)].map((m) => m[1]!))];
}

describe.skipIf(!root)('the uplink on a dual-stack node with one interface per family', () => {
  let conflist: string;
  let conf: Record<string, any>;

  beforeEach(async () => {
    s = await scratch();
    net = new TestNet();
    node = await net.netns('upl');
    const ip = (...args: string[]) => inNs(node, 'ip', args);
    const vnet = await net.netns('uplv'); // the far ends (no dummy module on every kernel: veths)
    await net.veth(node, V4, vnet, 'far4');
    await net.veth(node, V6, vnet, 'far6');
    await ip('addr', 'add', '10.240.0.4/24', 'dev', V4);
    await ip('route', 'add', 'default', 'via', '10.240.0.1', 'dev', V4);
    await ip('-6', 'addr', 'add', 'fd00:240::4/64', 'dev', V6, 'nodad');
    await ip('-6', 'route', 'add', 'default', 'via', 'fd00:240::1', 'dev', V6);
    // The shim in the IPAM slot over host-local handing out an IPv6 address; the rewrite on, reserved CIDRs set
    // (so doctor's route check runs), no "uplink": each caller finds it from the default routes.
    conf = shimConf({
      name: 'upl',
      dirs: s,
      delegate: hostLocal(s.dataDir, 'fd00:10::/64'),
      keys: { ipv6ProbeRewrite: 'on', residue: { ebtables: false, neigh: false }, reservedCIDRs: ['10.224.0.0/24'] },
    });
    const { cniVersion, name, ...plugin } = conf;
    conflist = join(s.dir, '10-upl.conflist');
    await writeFile(conflist, JSON.stringify({ cniVersion, name, plugins: [plugin] }));
  });

  afterEach(async () => {
    await net?.cleanup();
    await s?.cleanup();
  });

  it('doctor, probe-rewrite status/ensure and the ADD all name the same interface (the IPv6 default route’s)', async () => {
    // The ADD path: ipv6ProbeRewrite on, an IPv6 address handed out → the rewrite is ensured on the uplink.
    // A pod netns of its own: host-local ≥ 1.9 refuses a CNI_NETNS that is the netns it runs in (code 8).
    const pod = await net.netns('uplp');
    const add = await invoke(conf, { command: 'ADD', containerID: 'c-upl', netns: `/run/netns/${pod}`, ifname: 'eth0', inNetns: node });
    expect(add.exitCode, add.stdout + add.stderr).toBe(0);
    const fromAdd = await tableUplinks();

    const status = await shim('probe-rewrite', 'status', '--conflist', conflist, '--json');
    expect(status.json, status.stderr).toBeDefined();

    const doctor = await shim('doctor', '--conflist', conflist, '--json');
    const findings: Array<{ check: string; summary: string; data?: { uplink?: string } }> = doctor.json?.findings ?? [];
    const routes = findings.find((f) => f.check === 'reserved-routes');
    const probe = findings.find((f) => f.check === 'ipv6-probe');
    expect(routes?.summary, doctor.stdout + doctor.stderr).toMatch(/uplink \S+ from default route/);
    const fromDoctorRoutes = /uplink (\S+) from default route/.exec(routes!.summary)![1];

    await shim('probe-rewrite', 'remove', '--conflist', conflist);
    const ensure = await shim('probe-rewrite', 'ensure', '--conflist', conflist, '--json');
    expect(ensure.exitCode, ensure.stdout + ensure.stderr).toBe(0);
    const fromEnsure = await tableUplinks();

    expect({
      add: fromAdd,
      status: status.json.uplink,
      statusVerdict: status.json.verdict,
      doctorRoutes: fromDoctorRoutes,
      doctorProbe: probe?.data?.uplink,
      ensure: fromEnsure,
    }).toEqual({ add: [V6], status: V6, statusVerdict: 'ok', doctorRoutes: V6, doctorProbe: V6, ensure: [V6] });
  });
});
