// `ipam-shim doctor` (the BUILT CLI, run inside a node netns) on reserved subnets: a node whose routing table
// captures a reserved subnet (the seed case: a firewall subnet 10.224.0.0/24 inside a pod-CIDR route to another
// node) → exit 1 and a finding naming the route and the CIDR, whose fix, when run, makes the node clean; a clean
// node → exit 0; ledger addresses inside reserved CIDRs and host-local ranges over them are reported too.
import { execa } from 'execa';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { invoke, PLUGIN_DIR, scratch, shimBinDir, SHIM } from '../support/shim/cni.js';
import { shimConf, shimKeys } from '../support/shim/conf.js';
import { inNs, rootOrSkip, TestNet } from '../support/net/netns.js';
import { routedNode } from '../support/net/routed-node.js';
import { LEDGER_CHECK, RANGES_CHECK, ROUTES_CHECK, ledgerFindings, rangeFindings, routeFindings } from '../../src/reserved/doctor.js';
import { assessRanges, unreservedPieces } from '../../src/reserved/ranges.js';
import { formatIp } from '../../src/net/ip.js';
import { parseCidrs } from '../../src/net/cidr.js';
import { ErrorCode } from '../../src/cni/errors.js';

const root = rootOrSkip();

interface Finding {
  check: string;
  verdict: 'ok' | 'warn' | 'problem' | 'skipped';
  summary: string;
  fix?: string;
  data?: Record<string, unknown>;
}

let s: Awaited<ReturnType<typeof scratch>>;
let net: TestNet;
let node: string;

async function setUpNode(): Promise<void> {
  s = await scratch();
  net = new TestNet();
  // node: uplink up0 → netns vnet (VNet gateway 10.240.0.1 / fd00:240::1); vx0 → netns peer (another node).
  node = await routedNode(net, 'd');
  const ip = (...args: string[]) => inNs(node, 'ip', args);
  // Clean routes: other nodes' pod CIDRs outside the reserved subnets, and the reserved subnet via the VNet.
  await ip('route', 'add', '10.0.1.0/24', 'via', '10.99.0.2', 'dev', 'vx0');
  await ip('route', 'add', '10.224.0.0/24', 'via', '10.240.0.1', 'dev', 'up0', 'table', '100');
  await ip('-6', 'route', 'add', 'fd00:10:1::/64', 'via', 'fd00:99::2', 'dev', 'vx0');
}

const RESERVED = ['10.224.0.0/24', 'fd00:224::/48'];
const POD_RANGE = '10.241.0.0/24';

/** One conflist file, rewritten for each doctor run (doctor warns when another conflist sorts before the shim's). */
async function conflistPath(): Promise<string> {
  const dir = join(s.dir, 'net.d');
  await mkdir(dir, { recursive: true });
  return join(dir, '10-drsv.conflist');
}

/** The chained conflist (as design.md recommends), temp dirs only; the main plugin's IPAM is host-local here. */
async function chainedConflist(reserved: string[], over: Record<string, unknown> = {}): Promise<string> {
  const hostLocal = { type: 'host-local', dataDir: s.dataDir, ranges: [[{ subnet: POD_RANGE }]] };
  const list = {
    cniVersion: '1.0.0',
    name: 'drsv',
    plugins: [
      { type: 'ptp', ipMasq: false, ipam: hostLocal },
      shimKeys({ dirs: s, probeRewrite: false, delegate: hostLocal, keys: { reservedCIDRs: reserved, ...over } }),
    ],
  };
  const path = await conflistPath();
  await writeFile(path, JSON.stringify(list, null, 2));
  return path;
}

/** The IPAM-slot conflist: the shim wraps host-local. */
function slotConf(reserved: string[], delegate: Record<string, unknown>) {
  return shimConf({ name: 'drsv', dirs: s, probeRewrite: false, delegate, keys: { reservedCIDRs: reserved } });
}

async function slotConflist(reserved: string[], delegate: Record<string, unknown>): Promise<string> {
  const { cniVersion, name, ...plugin } = slotConf(reserved, delegate);
  const path = await conflistPath();
  await writeFile(path, JSON.stringify({ cniVersion, name, plugins: [plugin] }, null, 2));
  return path;
}

async function doctor(conflist: string, json = true) {
  // The shim's own bin dir first: doctor also checks that the runtime finds `ipam-shim` on the CNI path.
  const cniPath = `${await shimBinDir(s.dir).catch(() => join(s.dir, 'bin'))}:${PLUGIN_DIR}`;
  const args = ['netns', 'exec', node, SHIM, 'doctor', '--conflist', conflist, '--cni-path', cniPath, ...(json ? ['--json'] : [])];
  const r = await execa('ip', args, { reject: false, env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' }, extendEnv: false });
  let data: { network: string; findings: Finding[]; ok: boolean } | undefined;
  if (json) data = JSON.parse(r.stdout);
  return {
    exitCode: r.exitCode,
    stdout: r.stdout,
    stderr: r.stderr,
    data: data!,
    mine: (data?.findings ?? []).filter((f) => f.check.startsWith('reserved')),
  };
}

const bad = (fs: Finding[]) => fs.filter((f) => f.verdict === 'problem' || f.verdict === 'warn');

/** Runs the first `ip …` command quoted in backticks in a fix, inside the node (argv, no shell). */
async function applyFix(fix: string) {
  const cmd = /`(ip [^`]+)`/.exec(fix)?.[1];
  expect(cmd, fix).toBeDefined();
  const [, ...args] = cmd!.split(' ');
  await inNs(node, 'ip', args);
}

describe.skipIf(!root)('ipam-shim doctor: reserved subnets', () => {
  beforeEach(setUpNode);
  afterEach(async () => {
    await net?.cleanup();
    await s?.cleanup();
  });

  it('a clean node: exit 0, and each reserved-subnet look says ok', async () => {
    const out = await doctor(await chainedConflist(RESERVED));
    expect(out.stderr).toBe('');
    expect(out.data.findings.filter((f) => f.verdict !== 'ok' && f.verdict !== 'skipped')).toEqual([]);
    expect(out.exitCode).toBe(0);
    expect(out.data.ok).toBe(true);
    expect(out.mine.map((f) => [f.check, f.verdict])).toEqual([
      [ROUTES_CHECK, 'ok'],
      [LEDGER_CHECK, 'ok'],
      [RANGES_CHECK, 'ok'],
    ]);
    expect(out.mine[0]!.summary).toContain('uplink up0 from default route');
  });

  it('the seed case: a pod-CIDR route over the firewall subnet to another node → exit 1, the finding names route and CIDR, its fix cleans the node', async () => {
    await inNs(node, 'ip', ['route', 'add', '10.224.0.0/16', 'via', '10.99.0.2', 'dev', 'vx0']);
    const conflist = await chainedConflist(RESERVED);
    const out = await doctor(conflist);
    expect(out.exitCode).toBe(1);
    expect(out.data.ok).toBe(false);
    const found = bad(out.mine);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({
      check: ROUTES_CHECK,
      verdict: 'problem',
      data: {
        route: '10.224.0.0/16 via 10.99.0.2 dev vx0',
        table: 'main',
        reserved: '10.224.0.0/24',
        overlap: 'full',
        reason: 'other-device',
        uplink: 'up0',
      },
    });
    expect(found[0]!.summary).toContain('10.224.0.0/16 via 10.99.0.2 dev vx0');
    expect(found[0]!.summary).toContain('10.224.0.0/24');
    expect(found[0]!.fix).toContain('ip route add 10.224.0.0/24 via 10.240.0.1 dev up0');

    // The human table says the same, with the fix under it.
    const text = await doctor(conflist, false);
    expect(text.exitCode).toBe(1);
    expect(text.stdout).toMatch(
      /PROBLEM\s+reserved-routes\s+route "10\.224\.0\.0\/16 via 10\.99\.0\.2 dev vx0" sends all of reserved 10\.224\.0\.0\/24/,
    );
    expect(text.stdout).toContain('fix: add a more specific route for the reserved subnet: `ip route add 10.224.0.0/24 via 10.240.0.1 dev up0`');

    // Doing what the fix says (the more specific route via the VNet gateway) makes the node clean.
    await applyFix(found[0]!.fix!);
    const after = await doctor(conflist);
    expect(bad(after.mine)).toEqual([]);
    expect(after.exitCode).toBe(0);
  });

  it('a broad route shadowed by a more specific capturing one: only the specific is reported, and every fix, applied in turn, works', async () => {
    await inNs(node, 'ip', ['route', 'add', '10.224.0.0/16', 'via', '10.99.0.2', 'dev', 'vx0']);
    await inNs(node, 'ip', ['route', 'add', '10.224.0.0/24', 'via', '10.99.0.2', 'dev', 'vx0']);
    const conflist = await chainedConflist(RESERVED);
    const out = await doctor(conflist);
    expect(bad(out.mine).map((f) => f.data?.route)).toEqual(['10.224.0.0/24 via 10.99.0.2 dev vx0']);
    // The fixes only ever say what `ip` accepts: applyFix throws if `ip` refuses (e.g. "File exists").
    for (let round = 0; round < 3; round++) {
      const found = bad((await doctor(conflist)).mine);
      if (!found.length) break;
      await applyFix(found[0]!.fix!);
    }
    expect(bad((await doctor(conflist)).mine)).toEqual([]);
  });

  it('a route in a table no ip rule looks up is not reported; once a rule uses the table, it is', async () => {
    await inNs(node, 'ip', ['route', 'add', '10.224.0.0/24', 'via', '10.99.0.2', 'dev', 'vx0', 'table', '200']);
    const conflist = await chainedConflist(RESERVED);
    const idle = await doctor(conflist);
    expect(bad(idle.mine)).toEqual([]);
    expect(idle.exitCode).toBe(0);
    await inNs(node, 'ip', ['rule', 'add', 'from', POD_RANGE, 'lookup', '200', 'pref', '100']);
    const used = await doctor(conflist);
    expect(bad(used.mine).map((f) => [f.data?.route, f.data?.table])).toEqual([['10.224.0.0/24 via 10.99.0.2 dev vx0 table 200', '200']]);
  });

  it('IPv6: a route to another host on the uplink inside a reserved /48, and a blackhole over part of the IPv4 one', async () => {
    await inNs(node, 'ip', ['-6', 'route', 'add', 'fd00:224:0:5::/64', 'via', 'fd00:240::7', 'dev', 'up0']);
    await inNs(node, 'ip', ['route', 'add', 'blackhole', '10.224.0.128/25']);
    const out = await doctor(await chainedConflist(RESERVED));
    expect(out.exitCode).toBe(1);
    const found = bad(out.mine);
    expect(found.map((f) => [f.check, f.verdict, f.data?.route, f.data?.reserved, f.data?.overlap, f.data?.reason])).toEqual([
      [ROUTES_CHECK, 'problem', 'blackhole 10.224.0.128/25', '10.224.0.0/24', 'partial', 'blackhole'],
      [ROUTES_CHECK, 'problem', 'fd00:224:0:5::/64 via fd00:240::7 dev up0 metric 1024', 'fd00:224::/48', 'partial', 'other-gateway'],
    ]);
    expect(found[0]!.fix).toContain('ip route del blackhole 10.224.0.128/25');
    expect(found[1]!.fix).toContain('ip -6 route del fd00:224:0:5::/64');
    for (const f of found) await applyFix(f.fix!);
    const after = await doctor(await chainedConflist(RESERVED));
    expect(bad(after.mine)).toEqual([]);
  });

  it('a configured uplink wins over the default route', async () => {
    // The reserved subnet is reached through vx0 on this node (say, a VPN device): with uplink vx0, the route
    // via the VNet gateway on up0 is the capture.
    await inNs(node, 'ip', ['route', 'add', '10.224.0.0/24', 'via', '10.240.0.9', 'dev', 'up0']);
    const plain = await doctor(await chainedConflist(RESERVED));
    expect(bad(plain.mine).map((f) => f.data?.reason)).toEqual(['other-gateway']);
    const out = await doctor(await chainedConflist(RESERVED, { uplink: 'vx0' }));
    // The planted route through up0 now captures it; the VNet one in table 100 would too, but no ip rule looks
    // table 100 up, so no packet ever uses it.
    expect(
      bad(out.mine)
        .map((f) => [f.data?.route, f.data?.reason, f.data?.uplink])
        .sort(),
    ).toEqual([['10.224.0.0/24 via 10.240.0.9 dev up0', 'other-device', 'vx0']]);
    await inNs(node, 'ip', ['rule', 'add', 'from', POD_RANGE, 'lookup', '100', 'pref', '100']);
    const ruled = await doctor(await chainedConflist(RESERVED, { uplink: 'vx0' }));
    expect(
      bad(ruled.mine)
        .map((f) => f.data?.route)
        .sort(),
    ).toEqual(['10.224.0.0/24 via 10.240.0.1 dev up0 table 100', '10.224.0.0/24 via 10.240.0.9 dev up0']);
  });

  it('ledger addresses inside reserved CIDRs (reserved after ADD) and host-local ranges over them', async () => {
    const delegate = { type: 'host-local', dataDir: s.dataDir, ranges: [[{ subnet: POD_RANGE }]] };
    // The plugins run in the node; the pods are namespaces of their own, as a runtime makes them (newer reference
    // plugins refuse a CNI_NETNS that is their own netns).
    const podNetns = async () => `/run/netns/${await net.netns('dpod')}`;
    // A pod ADDed (in the IPAM slot, inside the node) before anyone reserved its address.
    const earlyPod = await podNetns();
    const added = await invoke(slotConf([], delegate), { command: 'ADD', containerID: 'early-pod', netns: earlyPod, ifname: 'eth0', inNetns: node });
    expect(added.exitCode, added.stdout).toBe(0);
    expect(added.json.ips[0].address).toBe('10.241.0.2/24');

    const out = await doctor(await slotConflist(['10.241.0.0/28'], delegate));
    expect(out.exitCode).toBe(1);
    const found = bad(out.mine);
    expect(found.map((f) => [f.check, f.verdict])).toEqual([
      [LEDGER_CHECK, 'problem'],
      [RANGES_CHECK, 'warn'],
    ]);
    expect(found[0]!.summary).toBe('pod attachment early-pod/eth0 holds 10.241.0.2, inside reserved 10.241.0.0/28 (network drsv)');
    expect(found[0]!.fix).toContain('early-pod');
    expect(found[1]!.summary).toBe(
      'delegate (host-local) range 10.241.0.1-10.241.0.254 of 10.241.0.0/24: 15 of 254 addresses lie in reserved 10.241.0.0/28; ADDs handed one of them are refused with code 100',
    );
    // The suggested ranges are host-local config that avoids the reserved CIDR: exactly the addresses after it.
    const pieces = JSON.parse(/: (\[.*\])$/.exec(found[1]!.fix!)![1]!);
    expect(pieces).toEqual([{ subnet: POD_RANGE, rangeStart: '10.241.0.16', rangeEnd: '10.241.0.254' }]);

    // Using the suggested range: a new pod gets an address outside the reserved CIDR, and the range is clean.
    const fixed = { ...delegate, ranges: [pieces] };
    const next = await invoke(slotConf(['10.241.0.0/28'], fixed), {
      command: 'ADD',
      containerID: 'new-pod',
      netns: await podNetns(),
      ifname: 'eth0',
      inNetns: node,
    });
    expect(next.exitCode, next.stdout).toBe(0);
    expect(next.json.ips[0].address).toBe('10.241.0.16/24');
    const ranged = await doctor(await slotConflist(['10.241.0.0/28'], fixed));
    expect(bad(ranged.mine).map((f) => f.check)).toEqual([LEDGER_CHECK]);

    // The fix for the ledger finding: the pod goes away (its DEL), and doctor is clean.
    const del = await invoke(slotConf(['10.241.0.0/28'], fixed), {
      command: 'DEL',
      containerID: 'early-pod',
      netns: earlyPod,
      ifname: 'eth0',
      inNetns: node,
    });
    expect(del.exitCode, del.stdout).toBe(0);
    const clean = await doctor(await slotConflist(['10.241.0.0/28'], fixed));
    expect(bad(clean.mine)).toEqual([]);
    expect(bad(clean.data.findings)).toEqual([]);
    expect(clean.exitCode).toBe(0);
  });

  it('a delegate range wholly inside reserved CIDRs is a problem (every ADD refused), also when several CIDRs cover it together', async () => {
    const dual = { type: 'host-local', dataDir: s.dataDir, ranges: [[{ subnet: POD_RANGE }], [{ subnet: 'fd00:224:1::/120' }]] };
    const out = await doctor(await slotConflist(['10.224.0.0/24', 'fd00:224:1::/121', 'fd00:224:1::80/121'], dual));
    expect(out.exitCode).toBe(1);
    const found = bad(out.mine);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ check: RANGES_CHECK, verdict: 'problem', data: { range: 'fd00:224:1::1-fd00:224:1::ff', usable: [] } });
    expect(found[0]!.summary).toContain('every ADD is refused');
    expect(found[0]!.summary).toContain('fd00:224:1::/121, fd00:224:1::80/121');
    // STATUS agrees: 50.
    const st = await invoke(
      { ...slotConf(['10.224.0.0/24', 'fd00:224:1::/121', 'fd00:224:1::80/121'], dual), cniVersion: '1.1.0' },
      { command: 'STATUS', path: [PLUGIN_DIR], inNetns: node },
    );
    expect(st.json).toMatchObject({ code: ErrorCode.PluginNotAvailable });
  });

  it('STATUS and doctor agree, through the built executable, on range sets bounded by rangeStart/rangeEnd, mixed sets and an empty set', async () => {
    const reserved = ['10.241.0.0/28', '10.242.0.8/29'];
    const shapes: Array<[string, Record<string, unknown>[][], 'no' | 'one set' | 'every set']> = [
      [
        'second set bounded inside a reserved CIDR',
        [[{ subnet: POD_RANGE }], [{ subnet: '10.242.0.0/24', rangeStart: '10.242.0.8', rangeEnd: '10.242.0.15' }]],
        'one set',
      ],
      [
        'a set of a wholly reserved range and a clean one',
        [[{ subnet: '10.241.0.0/24', rangeStart: '10.241.0.2', rangeEnd: '10.241.0.14' }, { subnet: '10.243.0.0/24' }]],
        'no',
      ],
      [
        'a wholly reserved set beside an empty set',
        [[{ subnet: '10.242.0.0/24', rangeStart: '10.242.0.9', rangeEnd: '10.242.0.14' }], []],
        'one set',
      ],
    ];
    for (const [name, ranges, refused] of shapes) {
      const delegate = { type: 'host-local', dataDir: s.dataDir, ranges };
      const st = await invoke({ ...slotConf(reserved, delegate), cniVersion: '1.1.0' }, { command: 'STATUS', path: [PLUGIN_DIR], inNetns: node });
      const status = st.exitCode === 0 ? 'no' : String(st.json.msg).includes('host-local takes an address from every set') ? 'one set' : 'every set';
      const problems = (await doctor(await slotConflist(reserved, delegate))).mine.filter((f) => f.check === RANGES_CHECK && f.verdict === 'problem');
      const doctorSays = !problems.length
        ? 'no'
        : problems.every((f) => f.summary.includes('host-local takes an address from every range set'))
          ? 'one set'
          : 'every set';
      expect({ name, status, doctor: doctorSays }).toEqual({ name, status: refused, doctor: refused });
      if (refused !== 'no') expect(st.json).toMatchObject({ code: ErrorCode.PluginNotAvailable });
    }
  });

  it('no reservedCIDRs: the reserved-subnet check is skipped, even with the capturing route in place', async () => {
    await inNs(node, 'ip', ['route', 'add', '10.224.0.0/16', 'via', '10.99.0.2', 'dev', 'vx0']);
    const out = await doctor(await chainedConflist([]));
    expect(out.mine.map((f) => [f.check, f.verdict])).toEqual([['reserved', 'skipped']]);
  });
});

// The pure parts behind the findings, on inputs the node tests above do not reach.
describe('reserved-subnet findings (pure)', () => {
  const cidrs = (...xs: string[]) => parseCidrs(xs);
  const range = (text: string) => assessRanges({ subnet: text }, [])[0]!.ranges[0]!.range;
  const texts = (rs: Array<{ family: 4 | 6; first: bigint; last: bigint }>) =>
    rs.map((r) => `${formatIp(r.family, r.first)}-${formatIp(r.family, r.last)}`);

  it('unreservedPieces: holes at both ends, in the middle, overlapping and adjacent reserved CIDRs, other family', () => {
    const r = range('10.0.0.0/24'); // 10.0.0.1-10.0.0.254
    expect(texts(unreservedPieces(r, cidrs('10.0.0.0/28', '10.0.0.64/27', '10.0.0.72/29', '10.0.0.96/27', '10.0.0.240/28', 'fd00::/8')))).toEqual([
      '10.0.0.16-10.0.0.63',
      '10.0.0.128-10.0.0.239',
    ]);
    expect(unreservedPieces(r, cidrs('10.0.0.0/25', '10.0.0.128/25'))).toEqual([]);
    expect(texts(unreservedPieces(r, cidrs('10.0.1.0/24')))).toEqual(['10.0.0.1-10.0.0.254']);
    expect(texts(unreservedPieces(range('fd00::/120'), cidrs('fd00::80/121')))).toEqual(['fd00::1-fd00::7f']);
  });

  it('rangeFindings: top-level subnet, a non-host-local delegate, a malformed one, and a wholly reserved set beside a clean one', () => {
    const f = rangeFindings(
      [
        { where: 'delegate', ipam: { type: 'host-local', subnet: '10.5.0.0/24', rangeStart: '10.5.0.10', rangeEnd: '10.5.0.20' } },
        { where: 'plugins[0].ipam', ipam: { type: 'azure-ipam' } },
        { where: 'plugins[1].ipam', ipam: { type: 'host-local', ranges: [[{ subnet: 'nonsense' }]] } },
      ],
      cidrs('10.5.0.16/30'),
    );
    expect(f.map((x) => [x.check, x.verdict])).toEqual([
      [RANGES_CHECK, 'warn'],
      [RANGES_CHECK, 'warn'],
    ]);
    expect(f[0]!.summary).toContain('4 of 11 addresses');
    expect(f[0]!.fix).toContain(
      '[{"subnet":"10.5.0.0/24","rangeStart":"10.5.0.10","rangeEnd":"10.5.0.15"},{"subnet":"10.5.0.0/24","rangeStart":"10.5.0.20","rangeEnd":"10.5.0.20"}]',
    );
    expect(f[1]!.summary).toMatch(/^cannot read the ranges of plugins\[1\]\.ipam/);

    const dual = rangeFindings(
      [{ where: 'delegate', ipam: { type: 'host-local', ranges: [[{ subnet: '10.6.0.0/24' }], [{ subnet: 'fd00:6::/120' }]] } }],
      cidrs('fd00:6::/64'),
    );
    expect(dual.map((x) => [x.verdict, x.summary.includes('host-local takes an address from every range set')])).toEqual([['problem', true]]);
    expect(rangeFindings([{ where: 'delegate', ipam: { type: 'azure-ipam' } }], cidrs('10.0.0.0/8'))).toMatchObject([{ verdict: 'skipped' }]);
  });

  it('ledgerFindings: intent records and agent attachments say so', () => {
    const rec = (containerID: string, owner: 'pod' | 'agent', state: 'intent' | 'attached', ips: string[]) => ({
      v: 1 as const,
      containerID,
      ifname: 'eth0',
      network: 'n',
      owner,
      state,
      placement: 'ipam' as const,
      ips,
      netns: '',
      createdAt: '',
      updatedAt: '',
    });
    const f = ledgerFindings(
      [rec('cilium-agent-health', 'agent', 'attached', ['10.7.0.5', 'fd00:7::5']), rec('p1', 'pod', 'intent', ['10.8.0.1'])],
      cidrs('10.7.0.0/24', 'fd00:7::/64'),
      'n',
    );
    expect(f.map((x) => x.summary)).toEqual([
      'agent attachment cilium-agent-health/eth0 holds 10.7.0.5, inside reserved 10.7.0.0/24 (network n)',
      'agent attachment cilium-agent-health/eth0 holds fd00:7::5, inside reserved fd00:7::/64 (network n)',
    ]);
    expect(f[0]!.fix).toContain('ipam-shim agent-ip release');
    expect(ledgerFindings([rec('p1', 'pod', 'intent', ['10.7.0.9'])], cidrs('10.7.0.0/24'), 'n')[0]!.summary).toContain('unfinished ADD');
  });

  it('routeFindings: no uplink known is a warning, not a guess', () => {
    expect(routeFindings([], cidrs('10.0.0.0/24'), undefined, 'default route')).toMatchObject([{ check: ROUTES_CHECK, verdict: 'warn' }]);
  });
});
