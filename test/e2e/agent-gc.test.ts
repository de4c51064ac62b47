// cilium-agent's own IPs and GC, for real: Debian's host-local as the delegate (spoken to at 1.0.0 under a
// 1.1.0 conflist), the project's libcni-like runner as the runtime (and the real libcni, the cnitool harness, for
// the runtime's own GC), pods in network namespaces.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { mkdir, readdir, readFile, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CniRunner } from '../support/runtimes/runner.js';
import { RUNTIMES, newRuntime, skipRuntime, type CniRuntime } from '../support/runtimes/runtimes.js';
import { TestNet, inNs, rootOrSkip, uid } from '../support/net/netns.js';
import { vnetBridge } from '../support/net/azure-vnet.js';
import { runInNetns } from '../../src/effects/exec.js';
import { shimKeys } from '../support/shim/conf.js';
import { agentIpArgv, chainedCniPath, writeChainedList } from '../support/shim/chained-node.js';
import { CiliumAgentStandIn } from '../support/doubles/cilium-agent.js';
import { logged } from '../support/shim/log.js';
import { SHIM, hostLocalAllocations, invoke, scratch, shimBinDir } from '../support/shim/cni.js';
import { ErrorCode } from '../../src/cni/errors.js';
import { parseMetrics, seriesKey } from '../../src/metrics.js';
import { agentGet, followAgent, type RunningAgent } from '../support/shim/agent.js';
import { waitFor } from '../support/wait.js';

const root = rootOrSkip();
const d = root ? describe : describe.skip;

interface Bed {
  s: Awaited<ReturnType<typeof scratch>>;
  net: TestNet;
  node: string;
  network: string;
  conflistPath: string;
  confList: any;
  runner: CniRunner;
  cniPath: string;
  owners: string[];
  /** cilium-agent's API for the cilium-cni stand-in; `agentEnv` is what a runtime passes on. */
  cilium: CiliumAgentStandIn;
  agentEnv: Record<string, string>;
}
let b: Bed;

beforeEach(async () => {
  if (!root) return;
  const s = await scratch();
  const net = new TestNet();
  const node = await net.netns('node');
  const network = `agn${uid()}`;
  const { confList, conflistPath } = await writeChainedList(s, network, { subnet: '10.77.0.0/24', rangeStart: '10.77.0.10', rangeEnd: '10.77.0.60' });
  const bin = await shimBinDir(s.dir);
  const cniPath = chainedCniPath(bin).join(':');
  const cilium = await CiliumAgentStandIn.start();
  net.defer(() => cilium.stop());
  const agentEnv = cilium.env();
  const runner = new CniRunner({ confList, pluginDirs: cniPath.split(':'), cacheDir: join(s.dir, 'cache'), netns: node, env: agentEnv });
  b = { s, net, node, network, conflistPath, confList, runner, cniPath, owners: [], cilium, agentEnv };
});

afterEach(async () => {
  if (!root) return;
  for (const owner of b.owners) await execa('ip', ['netns', 'del', `ipam-shim-agent-${owner}`], { reject: false });
  await b.net.cleanup();
  await b.s.cleanup();
});

async function agentIp(action: string, owner: string, extra: string[] = [], env: Record<string, string> = {}) {
  if (!b.owners.includes(owner)) b.owners.push(owner);
  const r = await execa('ip', agentIpArgv({ node: b.node, action, owner, conflist: b.conflistPath, cniPath: b.cniPath, extra }), {
    reject: false,
    env,
  });
  return { ...r, json: r.stdout ? JSON.parse(r.stdout) : undefined };
}

async function pod(name: string, rt: CniRuntime = b.runner) {
  const ns = await b.net.netns('pod');
  const path = `/run/netns/${ns}`;
  const result: any = await rt.add(name, path);
  return { ns, path, ip: String(result.ips[0].address).split('/')[0] };
}

/** The shim's GC verb, invoked directly as the runtime would (1.1.0, empty IDs). */
async function gcVerb(extra: Record<string, unknown>) {
  return invoke(
    { ...b.confList.plugins[1], name: b.network, cniVersion: '1.1.0', ...extra },
    { command: 'GC', path: b.cniPath.split(':'), inNetns: b.node },
  );
}

const store = () => hostLocalAllocations(b.s.dataDir, b.network);
const ledgerIps = async () => {
  const dir = join(b.s.stateDir, b.network, 'records');
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith('.json'));
  const recs = await Promise.all(names.map(async (n) => JSON.parse(await readFile(join(dir, n), 'utf8'))));
  return recs.flatMap((r) => r.ips as string[]);
};

d('agent IPs', () => {
  it('allocates once and returns the same IP on every later allocate (restart)', async () => {
    const first = await agentIp('allocate', 'health', ['--family', '4']);
    expect(first.exitCode, first.stderr + first.stdout).toBe(0);
    expect(first.json).toMatchObject({ containerID: 'cilium-agent-health', action: 'allocated' });
    const again = await agentIp('allocate', 'health', ['--family', '4']);
    expect(again.json).toMatchObject({ action: 'reused', ips: first.json.ips });
    expect(await store()).toEqual(first.json.ips);
    const list = await execa('ip', ['netns', 'exec', b.node, SHIM, 'agent-ip', 'list', '--conflist', b.conflistPath, '--json']);
    expect(JSON.parse(list.stdout).agentIPs).toMatchObject([{ owner: 'health', ips: first.json.ips, state: 'attached' }]);
    const released = await agentIp('release', 'health');
    expect(released.json.released).toEqual(first.json.ips);
    expect(await store()).toEqual([]);
  });

  it('a process killed mid-allocation still ends with exactly one allocation', async () => {
    b.confList.plugins[1].delegate = { ...b.confList.plugins[1].delegate, type: 'slow-ipam' };
    await writeFile(b.conflistPath, JSON.stringify(b.confList));
    const child = execa(
      'ip',
      ['netns', 'exec', b.node, SHIM, 'agent-ip', 'allocate', '--owner', 'ingress', '--conflist', b.conflistPath, '--cni-path', b.cniPath],
      {
        reject: false,
        env: { SLOW_IPAM_AFTER: '1.5' },
      },
    );
    b.owners.push('ingress');
    // Kill after host-local allocated but before the shim could record it.
    for (let i = 0; i < 100 && (await store()).length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await store()).toHaveLength(1);
    await execa('pkill', ['-KILL', '-f', `agent-ip allocate --owner ingress --conflist ${b.conflistPath}`], { reject: false });
    await child;
    // The orphaned delegate (slow-ipam still sleeping) finishes: nothing of that call is left in the node's netns.
    await waitFor('the orphaned delegate to end', async () => (await execa('ip', ['netns', 'pids', b.node])).stdout.trim() === '', 10_000);
    const again = await agentIp('allocate', 'ingress');
    expect(again.exitCode, again.stderr + again.stdout).toBe(0);
    expect(again.json.action).toBe('reallocated');
    expect(await store()).toEqual(again.json.ips);
  });

  it('a usage error in --owner exits 2, before anything is allocated', async () => {
    for (const owner of ['bad/name', '-x', '']) {
      const r = await execa(
        'ip',
        ['netns', 'exec', b.node, SHIM, 'agent-ip', 'allocate', `--owner=${owner}`, '--conflist', b.conflistPath, '--cni-path', b.cniPath],
        { reject: false },
      );
      expect(r.exitCode, `${owner}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(/--owner/);
    }
    expect(await store()).toEqual([]);
  });

  it("recovers when the delegate's store was wiped, and no address is recorded twice", async () => {
    const first = await agentIp('allocate', 'health');
    await rm(join(b.s.dataDir, b.network), { recursive: true, force: true });
    // host-local forgot it handed this address to the agent and offers it to a pod: the ledger refuses (11),
    // the runtime DELs the failed ADD and retries, and the retry gets another address.
    const ns = await b.net.netns('pod');
    await expect(b.runner.add('pod-after-wipe', `/run/netns/${ns}`)).rejects.toMatchObject({
      code: ErrorCode.TryAgainLater,
      msg: expect.stringContaining('cilium-agent-health'),
    });
    await b.runner.del('pod-after-wipe', `/run/netns/${ns}`);
    const retried: any = await b.runner.add('pod-after-wipe', `/run/netns/${ns}`);
    const podIp = String(retried.ips[0].address).split('/')[0];
    expect(podIp).not.toBe(first.json.ips[0]);
    // The agent's next start notices the delegate lost its allocation and allocates again.
    const again = await agentIp('allocate', 'health');
    expect(again.exitCode, again.stderr + again.stdout).toBe(0);
    expect(again.json.action).toBe('reallocated');
    expect(again.json.note).toMatch(/no longer holds/);
    expect(again.json.ips[0]).not.toBe(podIp);
    const ips = await ledgerIps();
    expect(new Set(ips).size).toBe(ips.length);
    expect((await store()).sort()).toEqual([podIp, again.json.ips[0]].sort());
  });

  it("cilium-ingress-<node> (cilium-agent's own call through the protocol) is the agent's, but no agent-ip owner: doctor and list say so", async () => {
    const health = await agentIp('allocate', 'health');
    expect(health.exitCode, health.stderr + health.stdout).toBe(0);
    const ns = await b.net.netns('ingress');
    await b.runner.add('cilium-ingress-node1', `/run/netns/${ns}`);
    await rm(join(b.s.dataDir, b.network), { recursive: true, force: true }); // the delegate forgets both
    const doctor = await execa('ip', ['netns', 'exec', b.node, SHIM, 'doctor', '--conflist', b.conflistPath, '--cni-path', b.cniPath, '--json'], {
      reject: false,
    });
    const findings: Array<{ check: string; verdict: string; summary: string; fix?: string }> = JSON.parse(doctor.stdout).findings;
    const agentFindings = findings.filter((f) => f.check === 'agent-ips');
    expect(agentFindings.map((f) => [f.summary.split(':')[0], f.verdict])).toEqual([
      ['cilium-agent-health', 'problem'],
      ['cilium-ingress-node1', 'problem'],
    ]);
    expect(agentFindings[0]!.fix).toContain('ipam-shim agent-ip allocate --owner health');
    // agent-ip cannot re-allocate what cilium-agent allocated itself: `--owner cilium-ingress-node1` would make
    // cilium-agent-cilium-ingress-node1, a second address nobody uses.
    expect(agentFindings[1]!.fix).not.toContain('--owner');
    expect(agentFindings[1]!.fix).toContain('restart cilium-agent');
    const list = await execa('ip', ['netns', 'exec', b.node, SHIM, 'agent-ip', 'list', '--conflist', b.conflistPath, '--json']);
    expect(JSON.parse(list.stdout).agentIPs.map((r: { owner: string | null; containerID: string }) => [r.owner, r.containerID])).toEqual([
      ['health', 'cilium-agent-health'],
      [null, 'cilium-ingress-node1'],
    ]);
  });
});

d("agent IPs get every cure at allocation, as a pod's address at ADD", () => {
  /** The shim's entry (chained, plugins[1]) with these keys and this delegate; the conflist rewritten. */
  async function shimEntry(keys: Record<string, unknown>, delegate?: Record<string, unknown>) {
    if (delegate) b.confList.plugins[0].ipam = delegate;
    b.confList.plugins[1] = shimKeys({ dirs: b.s, keys, delegate: delegate ?? b.confList.plugins[1].delegate });
    await writeFile(b.conflistPath, JSON.stringify(b.confList));
  }
  const recordFiles = async () =>
    (await readdir(join(b.s.stateDir, b.network, 'records')).catch(() => [] as string[])).filter((n) => n.endsWith('.json'));

  it('an address inside reservedCIDRs is refused (100) and released through the delegate: nothing leaked, nothing recorded', async () => {
    const owner = `cure-${uid()}`;
    // host-local hands out 10.77.0.10 first.
    await shimEntry({ residue: { ebtables: false, neigh: false }, reservedCIDRs: ['10.77.0.10/32'] });
    const refused = await agentIp('allocate', owner);
    expect(refused.exitCode, refused.stderr + refused.stdout).toBe(3);
    expect(refused.json).toMatchObject({ code: ErrorCode.ReservedAddress, error: expect.stringContaining('10.77.0.10') });
    expect(await store()).toEqual([]);
    expect(await recordFiles()).toEqual([]);
    // The next allocate gets the next address, outside the reserved CIDR.
    const next = await agentIp('allocate', owner);
    expect(next.exitCode, next.stderr + next.stdout).toBe(0);
    expect(next.json.ips).toEqual(['10.77.0.11']);
    // Reserved since: the kept allocation is refused on the next allocate (a restart) and released too.
    await shimEntry({ residue: { ebtables: false, neigh: false }, reservedCIDRs: ['10.77.0.8/29'] });
    const later = await agentIp('allocate', owner);
    expect(later.json).toMatchObject({ code: ErrorCode.ReservedAddress, error: expect.stringContaining('10.77.0.11') });
    expect(await store()).toEqual([]);
    expect(await recordFiles()).toEqual([]);
  });

  it("azure-vnet residue for the health address is removed: the peer's pings are lost before, answered after", async () => {
    const owner = `cure-${uid()}`;
    // The node: azure0 over the VNet's uplink (a client in `vnet`), host-local from 10.240.0.32, residue cure on.
    const vnet = await vnetBridge(b.net, b.node);
    const ipam = {
      type: 'host-local',
      dataDir: b.s.dataDir,
      ranges: [[{ subnet: '10.240.0.0/16', rangeStart: '10.240.0.32', rangeEnd: '10.240.0.63' }]],
    };
    await shimEntry({}, ipam);
    // azure-vnet's per-pod rules and PERMANENT neighbours for .32 (what the delegate will hand out) and .33.
    const inNode = runInNetns(b.node);
    const podRules = (ip: string, mac: string) => [
      `-A PREROUTING -p ARP --arp-op Request --arp-ip-dst ${ip} -j arpreply --arpreply-mac ${mac} --arpreply-target DROP`,
      `-A PREROUTING -p IPv4 -i eth0 --ip-dst ${ip} -j dnat --to-dst ${mac} --dnat-target ACCEPT`,
    ];
    const save = ['*nat', ...podRules('10.240.0.32', '0:d:3a:30:47:42'), ...podRules('10.240.0.33', '0:d:3a:30:47:33'), 'COMMIT', ''];
    await inNode('ebtables-restore', ['--noflush'], { input: save.join('\n') });
    await inNode('ip', ['neigh', 'add', '10.240.0.32', 'lladdr', '0:d:3a:30:47:42', 'dev', 'azure0', 'nud', 'permanent']);
    await inNode('ip', ['neigh', 'add', '10.240.0.33', 'lladdr', '0:d:3a:30:47:33', 'dev', 'azure0', 'nud', 'permanent']);
    // The health endpoint as cilium-agent wires it: a veth from the node into the owner's namespace.
    const agentNs = `ipam-shim-agent-${owner}`;
    b.owners.push(owner);
    await execa('ip', ['netns', 'add', agentNs]);
    await b.net.veth(agentNs, 'eth0', b.node, `hh${uid(4)}`);
    const hostDev = (JSON.parse((await inNode('ip', ['-j', 'link', 'show', 'type', 'veth'])).stdout) as Array<{ ifname: string }>).find((l) =>
      l.ifname.startsWith('hh'),
    )!.ifname;
    for (const args of [
      ['link', 'set', 'lo', 'up'],
      ['addr', 'add', '10.240.0.32/32', 'dev', 'eth0'],
      ['route', 'add', '169.254.1.1', 'dev', 'eth0'],
      ['route', 'add', 'default', 'via', '169.254.1.1', 'dev', 'eth0'],
    ])
      await inNs(agentNs, 'ip', args);
    await inNode('ip', ['addr', 'add', '169.254.1.1/32', 'dev', hostDev]);
    await inNode('ip', ['route', 'add', '10.240.0.32/32', 'dev', hostDev]);
    const ping = async () => inNs(vnet, 'ping', ['-c', '3', '-i', '0.2', '-W', '1', '-q', '10.240.0.32'], { reject: false });

    const before = await ping();
    expect(before.exitCode).not.toBe(0);
    expect(before.stdout).toContain('100% packet loss');

    const out = await agentIp('allocate', owner);
    expect(out.exitCode, out.stderr + out.stdout).toBe(0);
    expect(out.json.ips).toEqual(['10.240.0.32']);
    const after = await ping();
    expect(after.exitCode, after.stdout).toBe(0);
    expect(after.stdout).toContain(' 0% packet loss');
    // .32's rules and neighbour are gone; .33's stay (not ours to touch).
    const listing = (await inNode('ebtables', ['-t', 'nat', '-L', 'PREROUTING'])).stdout;
    expect(listing).not.toMatch(/10\.240\.0\.32 /);
    expect(listing.match(/10\.240\.0\.33 /g)).toHaveLength(2);
    const neigh = (await inNode('ip', ['neigh', 'show', 'nud', 'permanent'])).stdout;
    expect(neigh).not.toContain('10.240.0.32 ');
    expect(neigh).toContain('10.240.0.33 ');
  });

  it('an IPv6 address gets the probe rewrite ensured', async () => {
    const owner = `cure-${uid()}`;
    const inNode = runInNetns(b.node);
    await b.net.veth(b.node, 'eth0', await b.net.netns('lb'), 'eth0'); // the node's uplink
    const ipam = { type: 'host-local', dataDir: b.s.dataDir, ranges: [[{ subnet: 'fd00:77::/64' }]] };
    await shimEntry({ residue: { ebtables: false, neigh: false }, ipv6ProbeRewrite: 'on', uplink: 'eth0' }, ipam);
    const table = () => inNode('nft', ['list', 'table', 'ip6', 'azureSLBProbe'], { check: false });
    expect((await table()).exitCode).not.toBe(0);
    const out = await agentIp('allocate', owner, ['--family', '6']);
    expect(out.exitCode, out.stderr + out.stdout).toBe(0);
    expect(out.json.ips[0]).toMatch(/^fd00:77::/);
    const listed = await table();
    expect(listed.exitCode, listed.stderr).toBe(0);
    expect(listed.stdout).toContain('iifname "eth0"');
  });
});

d('GC', () => {
  async function world(rt: CniRuntime = b.runner) {
    const agent = await agentIp('allocate', 'health');
    const alive = await pod('pod-alive', rt);
    const listed = await pod('pod-listed', rt);
    const dead = await pod('pod-dead', rt);
    await execa('ip', ['netns', 'del', dead.ns]); // its sandbox is gone: provably dead
    return { agent: agent.json.ips[0] as string, alive, listed, dead };
  }

  for (const [label, key] of [
    ['an empty list', { 'cni.dev/valid-attachments': [] }],
    ['the legacy key only', { 'cni.dev/attachments': [] }],
  ] as const) {
    it(`with ${label}: keeps the agent's and the living, releases the dead`, async () => {
      const w = await world();
      const out = await gcVerb(key);
      expect(out.exitCode, out.stdout).toBe(0);
      const left = await store();
      expect(left).toContain(w.agent);
      expect(left).toContain(w.alive.ip);
      expect(left).toContain(w.listed.ip);
      expect(left).not.toContain(w.dead.ip);
      expect(await ledgerIps()).not.toContain(w.dead.ip);
      // Idempotent.
      expect((await gcVerb(key)).exitCode).toBe(0);
      expect(await store()).toEqual(left);
    });
  }

  // No list is no attachment valid (issue 36), as typed Go plugins read it: CRI-O's nil slice after a reboot (libcni
  // sends null), upstream `cnitool gc` (the key absent). The liveness guard keeps the living and the agent's.
  for (const [label, key, form] of [
    ['a missing key', {}, 'absent'],
    ['a null list', { 'cni.dev/valid-attachments': null, 'cni.dev/attachments': null }, 'null'],
    ['a null legacy list', { 'cni.dev/attachments': null }, 'null'],
  ] as const) {
    it(`with ${label}: no attachment valid: keeps the agent's and the living, releases the dead; the log says "${form}"`, async () => {
      const w = await world();
      const out = await gcVerb(key);
      expect(out.exitCode, out.stdout).toBe(0);
      expect((await store()).sort()).toEqual([w.agent, w.alive.ip, w.listed.ip].sort());
      expect(await ledgerIps()).not.toContain(w.dead.ip);
      const gcLines = await logged(b.s.logFile, 'GC');
      expect(gcLines.at(-1)).toMatchObject({ validList: form, released: 1, kept: 3, errors: 0 });
      // Idempotent.
      expect((await gcVerb(key)).exitCode).toBe(0);
      expect((await store()).sort()).toEqual([w.agent, w.alive.ip, w.listed.ip].sort());
    });
  }

  it('a malformed list is still 7, nothing released', async () => {
    const w = await world();
    const before = await store();
    const out = await gcVerb({ 'cni.dev/valid-attachments': 'all' });
    expect(out.json, out.stdout).toMatchObject({ code: ErrorCode.InvalidNetworkConfig, msg: expect.stringContaining('cni.dev/valid-attachments') });
    expect(await store()).toEqual(before);
    expect(await ledgerIps()).toContain(w.dead.ip);
  });

  it('a valid list without the agent never releases it; listed attachments are kept even if their netns is gone', async () => {
    const w = await world();
    await execa('ip', ['netns', 'del', w.listed.ns]);
    const out = await gcVerb({ 'cni.dev/valid-attachments': [{ containerID: 'pod-listed', ifname: 'eth0' }] });
    expect(out.exitCode, out.stdout).toBe(0);
    expect((await store()).sort()).toEqual([w.agent, w.alive.ip, w.listed.ip].sort());
  });

  for (const kind of RUNTIMES)
    it.skipIf(skipRuntime(kind))(
      `${kind}: the runtime's full GC on a 1.1.0 conflist: DELs of stale cached attachments, then GC releases the uncached leak`,
      async () => {
        const rt = newRuntime(kind, {
          confList: b.confList,
          pluginDirs: b.cniPath.split(':'),
          cacheDir: join(b.s.dir, 'cache'),
          netns: b.node,
          env: b.agentEnv,
        });
        const w = await world(rt);
        // A leak the runtime no longer knows: cache gone, sandbox gone, IP still allocated.
        const leak = await pod('pod-leak', rt);
        await unlink(rt.cacheFilePath('pod-leak'));
        await execa('ip', ['netns', 'del', leak.ns]);
        const report = await rt.gc([{ containerID: 'pod-alive', ifname: 'eth0' }]);
        expect(report.deleted.map((a) => a.containerID).sort()).toEqual(['pod-dead', 'pod-listed']);
        expect(report.gcSent).toBe(true);
        expect((await store()).sort()).toEqual([w.agent, w.alive.ip].sort());
      },
    );

  /** `ipam-shim gc` on the node, dry run unless --apply is among `extra`. */
  const gcCli = async (cacheDir: string, extra: string[] = []) => {
    const r = await execa(
      'ip',
      [
        'netns',
        'exec',
        b.node,
        SHIM,
        'gc',
        '--conflist',
        b.conflistPath,
        '--cni-path',
        b.cniPath,
        '--cache-dir',
        cacheDir,
        '--grace-seconds',
        '0',
        '--json',
        ...extra,
      ],
      { reject: false },
    );
    return { ...r, json: r.stdout ? JSON.parse(r.stdout) : undefined };
  };

  it('`ipam-shim gc --apply` releases exactly the uncached pod attachments that are dead', async () => {
    const w = await world();
    const uncachedAlive = await pod('pod-uncached-alive');
    await unlink(b.runner.cacheFilePath('pod-uncached-alive'));
    await unlink(b.runner.cacheFilePath('pod-dead'));
    const gc = (apply: boolean) => gcCli(join(b.s.dir, 'cache'), apply ? ['--apply'] : []);
    const dry = await gc(false);
    expect(dry.exitCode, dry.stderr).toBe(1);
    expect(JSON.parse(dry.stdout).release.map((r: any) => r.containerID)).toEqual(['pod-dead']);
    expect(await store()).toContain(w.dead.ip);
    const applied = await gc(true);
    expect(applied.exitCode, applied.stderr + applied.stdout).toBe(0);
    expect(JSON.parse(applied.stdout).released).toEqual([{ containerID: 'pod-dead', ifname: 'eth0' }]);
    expect((await store()).sort()).toEqual([w.agent, w.alive.ip, w.listed.ip, uncachedAlive.ip].sort());
  });

  it('a runtime cache out of sight (missing, unreadable, nothing for the network) releases nothing, says why, and exits 1; --allow-empty-cache overrides', async () => {
    const w = await world();
    const before = (await store()).sort();
    const fileNotDir = join(b.s.dir, 'cache-is-a-file');
    await writeFile(fileNotDir, 'x');
    await mkdir(join(b.s.dir, 'other-cache', 'results'), { recursive: true });
    await writeFile(
      join(b.s.dir, 'other-cache', 'results', `unrelated-c1-eth0`),
      JSON.stringify({ kind: 'cniCacheV1', containerId: 'c1', ifName: 'eth0', networkName: 'unrelated' }),
    );
    for (const [cacheDir, why] of [
      [join(b.s.dir, 'no-such-cache'), 'does not exist'],
      [fileNotDir, 'cannot be read'],
      [join(b.s.dir, 'other-cache'), `holds no entry for network ${b.network}`],
    ] as const) {
      const r = await gcCli(cacheDir, ['--apply']);
      expect(r.exitCode, `${cacheDir}: ${r.stderr}`).toBe(1);
      expect(r.json.refused).toContain(why);
      expect(r.json.refused).toContain('refusing to release anything');
      expect(r.json.released).toEqual([]);
      expect((await store()).sort(), cacheDir).toEqual(before);
    }
    const forced = await gcCli(join(b.s.dir, 'no-such-cache'), ['--apply', '--allow-empty-cache']);
    expect(forced.exitCode, forced.stderr + forced.stdout).toBe(0);
    expect(forced.json.released).toEqual([{ containerID: 'pod-dead', ifname: 'eth0' }]);
    expect((await store()).sort()).toEqual([w.agent, w.alive.ip, w.listed.ip].sort());
  });

  it('a corrupt cache file of another network whose name shares the prefix does not block gc; a corrupt one of this network does', async () => {
    await world();
    const results = join(b.s.dir, 'cache', 'results');
    // Network "<net>-b" (a longer name sharing the prefix): one readable file, one cut short mid-write.
    await writeFile(
      join(results, `${b.network}-b-c8-eth0`),
      JSON.stringify({ kind: 'cniCacheV1', containerId: 'c8', ifName: 'eth0', networkName: `${b.network}-b` }),
    );
    await writeFile(
      join(results, `${b.network}-b-c9-eth0`),
      `{"kind":"cniCacheV1","containerId":"c9","ifName":"eth0","networkName":"${b.network}-b","result":{"cniVers`,
    );
    await writeFile(join(results, `${b.network}-b-c7-eth0`), '');
    const ok = await gcCli(join(b.s.dir, 'cache'));
    expect(ok.stderr).toBe('');
    expect(ok.json.release.map((r: any) => r.containerID)).toEqual([]);
    expect(ok.json.valid.map((v: any) => v.containerID).sort()).toEqual(['pod-alive', 'pod-dead', 'pod-listed']);
    await writeFile(join(results, `${b.network}-pod-x-eth0`), '{"kind":"cniCacheV1","containerId":"pod-x"');
    const blocked = await gcCli(join(b.s.dir, 'cache'));
    // An incomplete list: gc could not run (exit 3 since issue 27's exit-code scheme; it was 1).
    expect(blocked.exitCode).toBe(3);
    expect(blocked.json.error).toContain('refusing to GC on an incomplete list');
  });
});

// The node agent's confirmed gc mode (the DaemonSet's default), as the built agent runs it over this bed: a leak is
// reported in every pass but released only once every pass of the window found it (a short window here: 4 s and 3
// passes at a 1 s interval; shipped: 15 minutes and 3 passes). A pass that cannot look, or an agent restart, starts
// the clock again.
d("the agent's confirmed GC mode", () => {
  const running: RunningAgent[] = [];
  afterEach(async () => {
    for (const a of running) a.proc.kill('SIGKILL');
    await Promise.allSettled(running.map((a) => a.proc));
    running.length = 0;
  });

  function agent(window: { afterS: number; passes: number }): RunningAgent {
    const args = ['agent', '--no-install', '--conflist', b.conflistPath, '--cni-path', b.cniPath, '--cache-dir', join(b.s.dir, 'cache')];
    const flags = ['--gc', 'confirmed', '--gc-confirm-after', String(window.afterS), '--gc-confirm-passes', String(window.passes)];
    const proc = execa('ip', ['netns', 'exec', b.node, SHIM, ...args, ...flags, '--grace-seconds', '0', '--interval', '1', '--jitter', '0'], {
      reject: false,
      buffer: false,
    });
    const a = followAgent(proc);
    running.push(a);
    return a;
  }

  /** The agent's address, a live pod, a pod the cache lost but whose sandbox lives, and two leaks. */
  async function world() {
    const health = await agentIp('allocate', 'health');
    expect(health.exitCode, health.stderr).toBe(0);
    const alive = await pod('pod-alive');
    const uncachedAlive = await pod('pod-uncached-alive');
    await unlink(b.runner.cacheFilePath('pod-uncached-alive'));
    const leaks = [];
    for (const id of ['pod-leak-1', 'pod-leak-2']) {
      const p = await pod(id);
      await unlink(b.runner.cacheFilePath(id));
      await execa('ip', ['netns', 'del', p.ns]);
      leaks.push(p.ip);
    }
    return { kept: [health.json.ips[0] as string, alive.ip, uncachedAlive.ip], leaks };
  }
  const released = (a: RunningAgent) => a.lines().filter((l) => String(l.msg).startsWith('GC released a confirmed leak'));
  /** A log line's time (ISO, ms). */
  const at = (l: Record<string, any>) => Date.parse(l.time);

  it('reports leaks in every pass, releases them only after the window, never a live pod or the agent address', async () => {
    const w = await world();
    const a = agent({ afterS: 4, passes: 3 });
    await waitFor('a confirmed release', () => a.passes().some((p) => p.released > 0), 60_000);
    const passes = a.passes();
    const first = passes.findIndex((p) => p.leaked === 2);
    const freed = passes.findIndex((p) => p.released > 0);
    expect(first, JSON.stringify(passes)).toBeGreaterThanOrEqual(0);
    // Every pass before the release found both, released nothing, and had both awaiting confirmation.
    for (const p of passes.slice(first, freed)) expect(p).toMatchObject({ leaked: 2, released: 0, awaiting: 2, errors: 0 });
    expect(freed - first, 'the release comes in the third pass that found them, or later').toBeGreaterThanOrEqual(2);
    expect(at(passes[freed]!) - at(passes[first]!), 'the window: 4 s').toBeGreaterThanOrEqual(4_000);
    expect(passes[freed]).toMatchObject({ released: 2, awaiting: 0, errors: 0 });
    // One line per release, naming the proof and the window it was seen leaked over.
    const lines = released(a);
    expect(lines.map((l) => l.ips[0]).sort()).toEqual([...w.leaks].sort());
    for (const l of lines) {
      expect(l).toMatchObject({ step: 'gc', mode: 'confirmed', reason: expect.stringContaining('sandbox is gone') });
      expect(l.passes).toBeGreaterThanOrEqual(3);
      expect(l.leakedForS).toBeGreaterThanOrEqual(4);
    }
    // Released from the delegate and the ledger; the rest untouched.
    expect((await store()).sort()).toEqual([...w.kept].sort());
    const recorded = await ledgerIps();
    for (const ip of w.kept) expect(recorded).toContain(ip);
    for (const ip of w.leaks) expect(recorded).not.toContain(ip);
    // Later passes release nothing more.
    const n = a.passes().length;
    await waitFor('two more passes', () => a.passes().length >= n + 2);
    for (const p of a.passes().slice(n)) expect(p).toMatchObject({ leaked: 0, released: 0, errors: 0 });
    expect((await store()).sort()).toEqual([...w.kept].sort());
    const m = parseMetrics((await agentGet(b.node, '/metrics')).body);
    expect(m.get(seriesKey('ipam_shim_agent_gc_confirmed_released_total', { network: b.network }))?.value).toBe(2);
    expect(m.get(seriesKey('ipam_shim_agent_gc_released_total', { network: b.network }))?.value).toBe(2);
    expect(m.get(seriesKey('ipam_shim_agent_gc_awaiting_confirmation', { network: b.network }))?.value).toBe(0);
    expect(m.get(seriesKey('ipam_shim_agent_gc_leaked', { network: b.network, mode: 'confirmed' }))?.value).toBe(0);
  });

  it('a pass that cannot read the cache starts the clock again', async () => {
    const w = await world();
    const results = join(b.s.dir, 'cache', 'results');
    const aside = join(b.s.dir, 'cache', 'results-aside');
    const a = agent({ afterS: 3, passes: 2 });
    await waitFor('a pass awaiting confirmation', () => a.passes().some((p) => p.awaiting === 2), 30_000);
    // The results directory replaced by a file: unreadable (ENOTDIR). Blind for longer than the window, so that
    // a clock kept through it would release at the first pass after the cache is back.
    await rename(results, aside);
    await writeFile(results, 'not a directory');
    const blindFrom = a.passes().length;
    await waitFor('passes over the unreadable cache', () => a.passes().length >= blindFrom + 5, 30_000);
    for (const p of a.passes().slice(blindFrom + 1)) expect(p, JSON.stringify(p)).toMatchObject({ released: 0, awaiting: 0 });
    expect((await store()).sort()).toEqual([...w.kept, ...w.leaks].sort());
    await unlink(results);
    await rename(aside, results);
    const back = Date.now();
    await waitFor('a confirmed release', () => a.passes().some((p) => p.released > 0), 60_000);
    for (const l of released(a)) expect(Date.parse(l.firstSeenAt)).toBeGreaterThanOrEqual(back - 1_000);
    const freed = a.passes().find((p) => p.released > 0)!;
    expect(at(freed) - back, 'released a whole window after the cache came back').toBeGreaterThanOrEqual(3_000);
    expect((await store()).sort()).toEqual([...w.kept].sort());
  });

  it('an agent restart starts the clock again', async () => {
    const w = await world();
    const first = agent({ afterS: 5, passes: 2 });
    await waitFor('leaks awaiting for 3 s', () => {
      const seen = first.passes().filter((p) => p.awaiting === 2);
      return seen.length >= 2 && at(seen.at(-1)!) - at(seen[0]!) >= 3_000;
    });
    first.proc.kill('SIGTERM');
    await first.proc;
    expect(released(first)).toEqual([]);
    const restarted = Date.now();
    const second = agent({ afterS: 5, passes: 2 });
    await waitFor('a confirmed release', () => second.passes().some((p) => p.released > 0), 60_000);
    const freed = second.passes().find((p) => p.released > 0)!;
    // Had the clock survived the restart, the release would come ~2 s after it.
    expect(at(freed) - restarted, 'a whole window after the restart').toBeGreaterThanOrEqual(5_000);
    expect((await store()).sort()).toEqual([...w.kept].sort());
  });
});
