// The verified azure-vnet reproduction (field-notes §1) as a test, through the REAL built plugin:
//   netns vnet (client 10.240.0.4/16) ── veth ── netns node: eth0 ⊂ bridge azure0 (10.240.0.5/16), ip_forward=1
//   a pod attached by the cilium-cni stand-in (the 1.17 line, docs/testing.md) delegating to host-local
//   10.240.0.32–63, with the runtime (CniRunner, or podman) running inside `node`, so every ebtables rule and
//   neighbour entry lives in `node` and the host is never touched. The VNet client routes the pod range via the node;
//   the node reaches the pod by cilium-cni's /32 endpoint route through lxc, the pod answers via its router address.
// The network is named "cilium" (AKS's list): a list named "azure" would put the real cilium-cni into its azure
// chaining mode (cilium-cni picks a chaining mode by the network's name), which the stand-in refuses.
// azure-vnet's exact per-pod rules for the pod's future address are installed BEFORE the pod exists, next to
// decoys for …3, …30, …33, an IPv6 dnat, node-wide rules and a PERMANENT stale neighbour on azure0.
// Without the shim the client's ping dies in the dnat rule; with the shim (either placement) it works, and
// everything else is byte-for-byte what it was.
import { execa } from 'execa';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { run as hostRun, runInNetns, type Run } from '../../src/effects/exec.js';
import { hostLocalAllocations, ledgerRecords, PLUGIN_DIR, pluginOutput, scratch, SHIM, shimBinDir } from '../support/shim/cni.js';
import { shimKeys } from '../support/shim/conf.js';
import { inNs, rootOrSkip, TestNet } from '../support/net/netns.js';
import { hasPodman, PodmanBed } from '../support/runtimes/podman.js';
import { CniRunner, PluginError } from '../support/runtimes/runner.js';
import { legacyFirstPath, natListing, natRestoreInput, podRules, vnetBridge, withoutLines } from '../support/net/azure-vnet.js';
import { ErrorCode } from '../../src/cni/errors.js';
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { ciliumCni, ciliumCniDir } from '../support/shim/cilium.js';

const POD = '10.240.0.32';
const DEAD_MAC = '0:d:3a:30:47:42'; // the MAC of the azure-vnet pod that once had 10.240.0.32
const RANGE = { subnet: '10.240.0.0/16', rangeStart: '10.240.0.32', rangeEnd: '10.240.0.63' };

const DNAT_POD = podRules(POD, DEAD_MAC)[1]!;
const NETWORK = 'cilium';
/** cilium-cni's place on the runtime's CNI_PATH: the 1.17 line (AKS's), first. */
const CILIUM_DIR = ciliumCniDir('1.17');

/** Lines of a listing that are a rule naming exactly the pod's address. */
const isPodLine = (l: string) => /--(arp-)?ip-dst 10\.240\.0\.32(\/32)? /.test(l);

const permanentNeigh = async (r: Run) => (await r('ip', ['neigh', 'show', 'nud', 'permanent'])).stdout;

interface Node {
  vnet: string;
  node: string;
  r: Run;
  eth0Mac: string;
  dir: Awaited<ReturnType<typeof scratch>>;
  shimBin: string;
}

const enabled = rootOrSkip();

describe.skipIf(!enabled)('azure-vnet residue: the reproduction with real packets', () => {
  // Registered before the netns cleanup so that it stops after it (hooks run as a stack): the deferred DELs still
  // find cilium-agent up.
  const a = useCiliumAgent();
  const net = new TestNet();
  afterEach(() => net.cleanup());

  /** Client, node with azure0 over the uplink, node-wide rules; no pod yet. */
  async function azureNode(): Promise<Node> {
    const dir = await scratch();
    net.defer(() => dir.cleanup());
    const node = await net.netns('node');
    const vnet = await vnetBridge(net, node);
    const r = runInNetns(node);
    const eth0Mac = (JSON.parse((await r('ip', ['-j', 'link', 'show', 'eth0'])).stdout) as Array<{ address: string }>)[0]!.address;
    return { vnet, node, r, eth0Mac, dir, shimBin: await shimBinDir(dir.dir) };
  }

  /**
   * What azure-vnet leaves: node-wide rules (kept working: they use eth0's own MAC, as azure-vnet does), the
   * pod's two rules, decoys for neighbouring and IPv6 addresses, a PERMANENT stale neighbour on azure0.
   * `bulk` unrelated per-pod rule pairs go in half before, half after the pod's rules (`restore`: the machine's
   * ebtables-restore, or a backend's own).
   */
  async function plantResidue(n: Node, bulk = 0, restore = 'ebtables-restore'): Promise<void> {
    const { r, eth0Mac } = n;
    const pre: string[][] = [
      ['-p', 'ARP', '--arp-op', 'Request', '--arp-ip-dst', '10.240.0.5', '-j', 'arpreply', '--arpreply-mac', eth0Mac],
      ...podRules('10.240.0.3', 'a2:96:88:20:cb:c6'),
      ...podRules('10.240.0.30/32', '0:d:3a:30:47:30'),
    ];
    const post: string[][] = [
      ...podRules('10.240.0.33', '0:d:3a:30:47:33'),
      ['-p', 'IPv6', '-i', 'eth0', '--ip6-dst', 'fd00:10:240::32', '-j', 'dnat', '--to-dst', DEAD_MAC, '--dnat-target', 'ACCEPT'],
      ['-p', 'ARP', '-i', 'eth0', '--arp-op', 'Reply', '-j', 'dnat', '--to-dst', 'ff:ff:ff:ff:ff:ff', '--dnat-target', 'ACCEPT'],
    ];
    const unrelated = Array.from({ length: bulk }, (_, i) =>
      podRules(`10.241.${Math.floor(i / 250)}.${(i % 250) + 1}`, `0:d:3a:1:${(i >> 8).toString(16)}:${(i & 255).toString(16)}`),
    ).flat();
    const chain = [...pre, ...unrelated.slice(0, bulk), ...podRules(POD, DEAD_MAC), ...unrelated.slice(bulk), ...post];
    await r(restore, ['--noflush'], { input: natRestoreInput(chain, eth0Mac) });
    await r('ip', ['neigh', 'add', POD, 'lladdr', DEAD_MAC, 'dev', 'azure0', 'nud', 'permanent']);
    await r('ip', ['neigh', 'add', '10.240.0.33', 'lladdr', '0:d:3a:30:47:33', 'dev', 'azure0', 'nud', 'permanent']);
  }

  const ping = async (n: Node, count = 3) =>
    (await inNs(n.vnet, 'ping', ['-c', String(count), '-i', '0.2', '-W', '1', '-q', POD], { reject: false })).exitCode;

  /** 'cilium-only': the node without the shim (on AKS cilium-cni + azure-ipam; here its IPAM is host-local). */
  type Placement = 'cilium-only' | 'chained' | 'ipam';
  function confList(n: Node, placement: Placement, cniVersion = '1.0.0'): Record<string, unknown> {
    const hostLocal = { type: 'host-local', dataDir: n.dir.dataDir, ranges: [[RANGE]] };
    const plugins =
      placement === 'ipam'
        ? [ciliumCni(shimKeys({ dirs: n.dir, delegate: hostLocal }))]
        : [ciliumCni(hostLocal), ...(placement === 'chained' ? [shimKeys({ dirs: n.dir })] : [])];
    return { cniVersion, name: NETWORK, plugins };
  }

  /** A runtime living in `node` (every plugin runs there through `ip netns exec`), `env` on top of the test's. */
  async function runtime(n: Node, placement: Placement, env?: Record<string, string>): Promise<{ runner: CniRunner; conflist: string }> {
    const list = confList(n, placement);
    const conflist = join(n.dir.dir, `${placement}.conflist`);
    await writeFile(conflist, JSON.stringify(list));
    const runner = new CniRunner({
      confList: list,
      pluginDirs: [CILIUM_DIR, n.shimBin, PLUGIN_DIR],
      cacheDir: join(n.dir.dir, 'cache'),
      netns: n.node,
      env: { ...a.agent.env(), ...env },
    });
    return { runner, conflist };
  }

  async function pod(runner: CniRunner, id = 'c1'): Promise<{ netns: string; result: Record<string, any> }> {
    const netns = `/run/netns/${await net.netns('pod')}`;
    const result = await runner.add(id, netns, 'eth0');
    net.defer(() => runner.del(id, netns, 'eth0').catch(() => undefined));
    return { netns, result };
  }

  /** How many CNI calls of `command` the shim logged (one "CNI call …" line per call). */
  async function shimCalls(n: Node, command: string): Promise<number> {
    const text = await readFile(n.dir.logFile, 'utf8').catch(() => '');
    return text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { command?: string; msg?: string })
      .filter((l) => l.command === command && String(l.msg).startsWith('CNI call ')).length;
  }

  /** The operator CLI of the built plugin, run on the node. */
  async function cli(
    n: Node,
    args: string[],
    env?: Record<string, string>,
  ): Promise<{ exitCode: number; stdout: string; stderr: string; json: any }> {
    const r = await inNs(n.node, SHIM, [...args, '--json'], { reject: false, ...(env ? { env } : {}) });
    return pluginOutput(r);
  }

  it('without the shim the ping dies in the stale dnat rule; `residue clean --apply --ip` cures it, leaving the rest', async () => {
    const n = await azureNode();
    await plantResidue(n);
    const { runner } = await runtime(n, 'cilium-only');
    const { result } = await pod(runner);
    // cilium-cni gives the pod its address as /32 (ptp kept host-local's /16).
    expect(result.ips[0].address).toBe(`${POD}/32`);

    const before = await natListing(n.r);
    const podLines = before.split('\n').filter(isPodLine);
    expect(podLines).toHaveLength(2);
    expect(await ping(n)).not.toBe(0);
    // It is the dnat rule that eats the pings: its counter rose.
    const counted = (await n.r('ebtables', ['-t', 'nat', '-L', 'PREROUTING', '--Lc'])).stdout.split('\n').find((l) => l.includes(`--ip-dst ${POD} `));
    expect(Number(/pcnt = (\d+)/.exec(counted ?? '')?.[1])).toBeGreaterThan(0);

    // No shim conflist on this "node" (an empty conf dir): the CLI works on the named address.
    const confDir = join(n.dir.dir, 'empty-net.d');
    await mkdir(confDir, { recursive: true });
    const scan = await cli(n, ['residue', 'scan', '--ip', POD, '--conf-dir', confDir]);
    expect(scan.exitCode, scan.stderr).toBe(1);
    expect(scan.json.ledgerNote).toMatch(/no ipam-shim conflist/);
    expect(scan.json.targets).toHaveLength(1);
    expect(scan.json.targets[0]).toMatchObject({ ip: POD, sources: ['named'] });
    expect(scan.json.targets[0].rules.map((x: any) => x.kind)).toEqual(['arpreply', 'dnat4']);
    expect(scan.json.targets[0].neighbours).toEqual([{ ip: POD, dev: 'azure0', mac: '00:0d:3a:30:47:42', state: ['PERMANENT'] }]);
    // Orphans: the decoys' dead MACs are on no interface here; the node IP's ARP reply (eth0's MAC) and the
    // broadcast rewrite are not per-pod residue.
    expect(scan.json.orphans.map((o: any) => o.ip).sort()).toEqual([
      '10.240.0.3',
      '10.240.0.3',
      '10.240.0.30',
      '10.240.0.30',
      '10.240.0.33',
      '10.240.0.33',
      'fd00:10:240::32',
    ]);

    const dry = await cli(n, ['residue', 'clean', '--ip', POD, '--conf-dir', confDir]);
    expect(dry.exitCode).toBe(1);
    expect(dry.json.counts).toMatchObject({ rules: 2, neighbours: 1 });
    expect(await natListing(n.r)).toBe(before);

    const neighBefore = await permanentNeigh(n.r);
    const applied = await cli(n, ['residue', 'clean', '--apply', '--ip', POD, '--conf-dir', confDir]);
    expect(applied.exitCode, applied.stdout).toBe(0);
    expect(applied.json.counts).toMatchObject({ rules: 2, neighbours: 1, leftRules: 0, leftNeighbours: 0, errors: 0 });
    expect(await natListing(n.r)).toBe(withoutLines(before, podLines));
    expect(await permanentNeigh(n.r)).toBe(withoutLines(neighBefore, [`${POD} dev azure0 lladdr 00:0d:3a:30:47:42 PERMANENT `]));
    expect(await ping(n)).toBe(0);
    expect((await cli(n, ['residue', 'scan', '--ip', POD, '--conf-dir', confDir])).exitCode).toBe(0);
  });

  it("`residue clean --ip <node IP> --apply` is refused (exit 2): the node IP's ARP responder and neighbours stay", async () => {
    // Before: it removed them (exit 0), like any per-pod-shaped rule for a named address.
    const n = await azureNode();
    await plantResidue(n);
    // The node IP answered with a foreign MAC too, and a PERMANENT entry for it: only its being the node's protects them.
    await n.r('ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...podRules('10.240.0.5', '0:d:3a:30:47:5')[1]!]);
    await n.r('ip', ['neigh', 'add', '10.240.0.5', 'lladdr', '0:d:3a:30:47:5', 'dev', 'eth0', 'nud', 'permanent']);
    const before = await natListing(n.r);
    const neighBefore = await permanentNeigh(n.r);
    const confDir = join(n.dir.dir, 'empty-net.d');
    await mkdir(confDir, { recursive: true });
    for (const args of [
      ['residue', 'clean', '--apply', '--ip', '10.240.0.5', '--conf-dir', confDir],
      ['residue', 'clean', '--apply', '--ip', POD, '--ip', '10.240.0.5', '--conf-dir', confDir],
      ['residue', 'scan', '--ip', '10.240.0.5', '--conf-dir', confDir],
    ]) {
      const r = await cli(n, args);
      expect(r.exitCode, `${args.join(' ')}: ${r.stdout}`).toBe(2);
      expect(r.stderr).toContain('--ip 10.240.0.5: 10.240.0.5 is an address of this node (on azure0)');
    }
    expect(await natListing(n.r)).toBe(before);
    expect(await permanentNeigh(n.r)).toBe(neighBefore);
    // The cure still works for a pod's address.
    const applied = await cli(n, ['residue', 'clean', '--apply', '--ip', POD, '--conf-dir', confDir]);
    expect(applied.exitCode, applied.stdout).toBe(0);
    expect(applied.json.counts).toMatchObject({ rules: 2, neighbours: 1, leftRules: 0, leftNeighbours: 0, errors: 0 });
    expect(await natListing(n.r)).toBe(withoutLines(before, before.split('\n').filter(isPodLine)));
  });

  it("ADD of an address the node holds (a delegate range over the node's IP) removes none of the node's rules or neighbours", async () => {
    // Behaviour change: before, ADD removed the node IP's rules and entries as residue of the address it handed out.
    const n = await azureNode();
    await plantResidue(n);
    await n.r('ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...podRules('10.240.0.60', DEAD_MAC)[1]!]);
    await n.r('ip', ['neigh', 'add', '10.240.0.60', 'lladdr', DEAD_MAC, 'dev', 'azure0', 'nud', 'permanent']);
    // The node also holds 10.240.0.60 (a secondary address), and the delegate's range is that one address.
    await n.r('ip', ['addr', 'add', '10.240.0.60/32', 'dev', 'azure0']);
    const before = await natListing(n.r);
    const neighBefore = await permanentNeigh(n.r);
    const hostLocal = { type: 'host-local', dataDir: n.dir.dataDir, ranges: [[{ ...RANGE, rangeStart: '10.240.0.60', rangeEnd: '10.240.0.60' }]] };
    const list = { cniVersion: '1.0.0', name: NETWORK, plugins: [ciliumCni(shimKeys({ dirs: n.dir, delegate: hostLocal }))] };
    const runner = new CniRunner({
      confList: list,
      pluginDirs: [CILIUM_DIR, n.shimBin, PLUGIN_DIR],
      cacheDir: join(n.dir.dir, 'cache'),
      netns: n.node,
      env: a.agent.env(),
    });
    const { result } = await pod(runner);
    expect(result.ips[0].address).toBe('10.240.0.60/32');
    expect(await natListing(n.r)).toBe(before);
    expect(await permanentNeigh(n.r)).toBe(neighBefore);
    const log = (await readFile(n.dir.logFile, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, any>);
    const spared = log.find((l) => /node's own rules and neighbours alone/.test(l.msg));
    expect(spared?.spared.map((x: any) => x.why)).toEqual([
      expect.stringContaining('10.240.0.60 is an address of this node (on azure0)'),
      expect.stringContaining('10.240.0.60 is an address of this node (on azure0)'),
    ]);
  });

  it("a PERMANENT neighbour on the pod's own host-side interface is not residue: ADD, CHECK, doctor, scan and clean agree", async () => {
    const n = await azureNode();
    const { runner, conflist } = await runtime(n, 'chained');
    const { netns, result } = await pod(runner);
    const hostDev = (result.interfaces as Array<{ name: string; sandbox?: string }>).find((i) => !i.sandbox)!.name;
    await n.r('ip', ['neigh', 'replace', POD, 'lladdr', '0a:58:0a:f0:00:20', 'dev', hostDev, 'nud', 'permanent']);
    const own = `${POD} dev ${hostDev} lladdr 0a:58:0a:f0:00:20 PERMANENT`;
    // The rule still catches residue on another interface in the same call.
    await n.r('ip', ['neigh', 'add', POD, 'lladdr', DEAD_MAC, 'dev', 'azure0', 'nud', 'permanent']);
    expect((await cli(n, ['residue', 'scan', '--conflist', conflist])).json.targets[0].neighbours).toEqual([
      { ip: POD, dev: 'azure0', mac: '00:0d:3a:30:47:42', state: ['PERMANENT'] },
    ]);
    expect((await cli(n, ['residue', 'clean', '--apply', '--conflist', conflist])).exitCode).toBe(0);
    expect(await permanentNeigh(n.r)).toContain(own);
    expect(await permanentNeigh(n.r)).not.toContain('azure0');

    await runner.check('c1', netns, 'eth0');
    const scan = await cli(n, ['residue', 'scan', '--conflist', conflist]);
    expect(scan.exitCode, scan.stdout).toBe(0);
    const doctor = await cli(n, ['doctor', '--conflist', conflist]);
    expect(doctor.json.findings.filter((f: any) => f.check === 'residue' && f.verdict === 'problem')).toEqual([]);
    expect(await permanentNeigh(n.r)).toContain(own);
  });

  describe.each(['chained', 'ipam'] as const)('the shim %s', (placement) => {
    const recheck =
      placement === 'chained'
        ? 'CHECK catches a re-added rule (102)'
        : 'a re-added rule: CHECK never reaches the shim (cilium-cni does not forward it), doctor and residue scan/clean catch it';
    it(`ADD removes exactly the pod’s residue: ping works, decoys and node-wide rules are untouched; ${recheck}`, async () => {
      const n = await azureNode();
      await plantResidue(n);
      const before = await natListing(n.r);
      const neighBefore = await permanentNeigh(n.r);
      const podLines = before.split('\n').filter(isPodLine);
      expect(podLines).toHaveLength(2);
      expect(neighBefore).toContain(`${POD} dev azure0 lladdr 00:0d:3a:30:47:42 PERMANENT`);

      const { runner, conflist } = await runtime(n, placement);
      const { netns, result } = await pod(runner);
      expect(result.ips[0].address).toBe(`${POD}/32`);
      expect(await ledgerRecords(n.dir.stateDir, NETWORK)).toEqual(['c1:eth0.json']);

      expect(await ping(n)).toBe(0);
      expect(await natListing(n.r)).toBe(withoutLines(before, podLines));
      expect(await permanentNeigh(n.r)).toBe(withoutLines(neighBefore, [`${POD} dev azure0 lladdr 00:0d:3a:30:47:42 PERMANENT `]));

      await runner.check('c1', netns, 'eth0');
      expect((await cli(n, ['residue', 'scan', '--conflist', conflist])).json).toMatchObject({
        network: NETWORK,
        ok: true,
        targets: [{ ip: POD, sources: ['ledger'], attachments: ['c1/eth0'], rules: [], neighbours: [] }],
      });

      // azure-vnet (or anyone) puts the dnat rule back.
      await n.r('ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...DNAT_POD]);
      const checksBefore = await shimCalls(n, 'CHECK');
      const err = await runner.check('c1', netns, 'eth0').then(
        () => undefined,
        (e: unknown) => e,
      );
      if (placement === 'chained') {
        // Chained, the runtime's CHECK reaches the shim: it says so, with the rule in details.
        expect(err).toBeInstanceOf(PluginError);
        expect((err as PluginError).code).toBe(ErrorCode.ResidueCleanupFailed);
        expect((err as PluginError).plugin).toBe('ipam-shim');
        expect((err as PluginError).details).toContain(`--ip-dst ${POD} -j dnat`);
        expect(await shimCalls(n, 'CHECK')).toBe(checksBefore + 1);
      } else {
        // In cilium-cni's IPAM slot it never does: cilium-cni checks its own endpoint and interface and does not
        // forward CHECK to IPAM (docs/testing.md), so CHECK passes with the pod unreachable. What sees it there is
        // the operator's side below (doctor, residue scan/clean) and the agent's residue pass (test/e2e/agent.test.ts).
        expect(err).toBeUndefined();
        expect(runner.invocations.filter((i) => i.command === 'CHECK').at(-1)?.plugin).toBe('cilium-cni');
        expect(await shimCalls(n, 'CHECK')).toBe(0);
      }
      expect(await ping(n)).not.toBe(0);

      // The operator sees it (doctor and scan name the attachment), cleans it, and CHECK passes again.
      const doctor = await cli(n, ['doctor', '--conflist', conflist]);
      const finding = doctor.json.findings.find((f: any) => f.check === 'residue' && f.verdict === 'problem');
      expect(finding?.summary).toContain(`${POD} (c1/eth0)`);
      expect(finding?.fix).toBe(`ipam-shim residue clean --apply --conflist ${conflist}`);
      const scan = await cli(n, ['residue', 'scan', '--conflist', conflist]);
      expect(scan.exitCode).toBe(1);
      expect(scan.json.targets[0].rules.map((x: any) => x.kind)).toEqual(['dnat4']);
      expect((await cli(n, ['residue', 'clean', '--apply', '--conflist', conflist])).exitCode).toBe(0);
      await runner.check('c1', netns, 'eth0');
      expect(await ping(n)).toBe(0);
      expect(await natListing(n.r)).toBe(withoutLines(before, podLines));

      await runner.del('c1', netns, 'eth0');
      expect(await ledgerRecords(n.dir.stateDir, NETWORK)).toEqual([]);
      expect(await hostLocalAllocations(n.dir.dataDir, NETWORK)).toEqual([]);
    });
  });

  // ebtables-legacy and ebtables-nft see different tables. azure-vnet wrote its rules with ebtables-nft; the node's
  // `ebtables` alternative (the one the runtime's PATH gives the plugin) is ebtables-legacy, whose nat table this
  // kernel cannot build ("The kernel doesn't support the ebtables 'nat' table"). Before, the shim read only that
  // `ebtables`, took the kernel's answer for "no ebtables" and left the residue: the ping stayed dead.
  describe("the node's ebtables is ebtables-legacy, azure-vnet's rules are in ebtables-nft", () => {
    async function legacyNode(): Promise<{ n: Node; env: Record<string, string>; before: string; podLines: string[] }> {
      const n = await azureNode();
      const env = { PATH: await legacyFirstPath(net) };
      const legacy = await inNs(n.node, 'ebtables', ['-t', 'nat', '-L'], { reject: false, env });
      expect(legacy.stderr).toMatch(/doesn't support the ebtables 'nat' table/); // the PATH's ebtables is the legacy one
      await plantResidue(n, 0, 'ebtables-nft-restore');
      const before = await natListing(n.r, 'ebtables-nft');
      const podLines = before.split('\n').filter(isPodLine);
      expect(podLines).toHaveLength(2);
      return { n, env, before, podLines };
    }

    it.each(['chained', 'ipam'] as const)(
      'ADD (the shim %s) removes the pod’s rules from ebtables-nft, logging the backend; decoys stay; ping works; a re-added rule is seen (CHECK chained, doctor)',
      async (placement) => {
        const { n, env, before, podLines } = await legacyNode();
        const { runner, conflist } = await runtime(n, placement, env);
        const { netns } = await pod(runner);
        expect(await ping(n)).toBe(0);
        expect(await natListing(n.r, 'ebtables-nft')).toBe(withoutLines(before, podLines));
        // doctor (the same PATH) says which backends it read, and why legacy was not.
        const ok = (await cli(n, ['doctor', '--conflist', conflist], env)).json.findings.find((f: any) => f.check === 'residue');
        expect(ok.verdict).toBe('ok');
        expect(ok.summary).toMatch(/\[ebtables nft: read; legacy: unavailable: the kernel cannot hold its tables: .*\]$/);

        const removed = (await readFile(n.dir.logFile, 'utf8'))
          .split('\n')
          .filter((l) => l.includes('removed stale residue'))
          .map((l) => JSON.parse(l) as { ebtables: Array<{ backend: string; program: string; rule: string }> });
        expect(removed).toHaveLength(1);
        expect(removed[0]!.ebtables.map((x) => [x.backend, x.program])).toEqual([
          ['nft', 'ebtables-nft'],
          ['nft', 'ebtables-nft'],
        ]);

        await runner.check('c1', netns, 'eth0');
        await n.r('ebtables-nft', ['-t', 'nat', '-A', 'PREROUTING', ...DNAT_POD]);
        const err = await runner.check('c1', netns, 'eth0').then(
          () => undefined,
          (e: unknown) => e,
        );
        if (placement === 'chained') {
          expect((err as PluginError).code).toBe(ErrorCode.ResidueCleanupFailed);
          expect((err as PluginError).details).toContain(`--ip-dst ${POD} -j dnat`);
        } else {
          // cilium-cni does not forward CHECK to its IPAM plugin: the shim is not asked, doctor below is what sees it.
          expect(err).toBeUndefined();
          expect(await shimCalls(n, 'CHECK')).toBe(0);
        }
        const problem = (await cli(n, ['doctor', '--conflist', conflist], env)).json.findings.find(
          (f: any) => f.check === 'residue' && f.verdict === 'problem',
        );
        expect(problem?.summary).toContain(`stale residue for ${POD} (c1/eth0): 1 ebtables rule(s)`);
      },
    );

    it('residue scan says which backend holds the rules and that legacy is unavailable (not "no rules"); clean --apply removes only the named IP’s', async () => {
      const { n, env, before, podLines } = await legacyNode();
      const confDir = join(n.dir.dir, 'empty-net.d');
      await mkdir(confDir, { recursive: true });
      const args = ['--ip', POD, '--conf-dir', confDir];

      const scan = await cli(n, ['residue', 'scan', ...args], env);
      expect(scan.exitCode, scan.stderr).toBe(1);
      expect(scan.json.ebtablesAvailable).toBe(true);
      expect(scan.json.ebtablesBackends).toEqual([
        { name: 'nft', program: 'ebtables-nft', available: true, rules: expect.any(Number) },
        { name: 'legacy', available: false, reason: expect.stringMatching(/^the kernel cannot hold its tables: /) },
      ]);
      expect(scan.json.targets[0].rules.map((x: any) => [x.kind, x.backend])).toEqual([
        ['arpreply', 'nft'],
        ['dnat4', 'nft'],
      ]);
      const text = await inNs(n.node, SHIM, ['residue', 'scan', ...args], { reject: false, env });
      expect(text.stdout).toMatch(/^ebtables legacy: unavailable: the kernel cannot hold its tables/m);
      expect(text.stdout).toContain(`found         ebtables-nft -t nat PREROUTING -p ARP --arp-op Request --arp-ip-dst ${POD} -j arpreply`);

      // Forced onto the legacy backend alone (--ebtables-backend), the kernel's own answer is reported: unavailable.
      const forced = await cli(n, ['residue', 'scan', '--ebtables-backend', 'legacy', ...args], env);
      expect(forced.json.ebtablesAvailable).toBe(false);
      expect(forced.json.ebtablesBackends[0]).toEqual({
        name: 'legacy',
        program: 'ebtables',
        available: false,
        reason: "The kernel doesn't support the ebtables 'nat' table.",
      });

      const applied = await cli(n, ['residue', 'clean', '--apply', ...args], env);
      expect(applied.exitCode, applied.stdout).toBe(0);
      expect(applied.json.counts).toMatchObject({ rules: 2, neighbours: 1, leftRules: 0, errors: 0 });
      expect(await natListing(n.r, 'ebtables-nft')).toBe(withoutLines(before, podLines));
      expect((await cli(n, ['residue', 'scan', ...args], env)).exitCode).toBe(0);
    });
  });

  it('a node with 2,000 unrelated residue rules: ADD (IPAM slot) removes exactly the pod’s two', async () => {
    const n = await azureNode();
    await plantResidue(n, 1000);
    const before = await natListing(n.r);
    expect(before).toMatch(/Bridge chain: PREROUTING, entries: 2011,/);
    const podLines = before.split('\n').filter(isPodLine);
    expect(podLines).toHaveLength(2);

    const { runner, conflist } = await runtime(n, 'ipam');
    const { netns } = await pod(runner);
    expect(await natListing(n.r)).toBe(withoutLines(before, podLines));
    expect(await ping(n)).toBe(0);
    // CHECK is cilium-cni's own here (it does not reach the shim in its IPAM slot); the scan reads all 2,011 rules.
    await runner.check('c1', netns, 'eth0');
    expect((await cli(n, ['residue', 'scan', '--conflist', conflist])).json).toMatchObject({ ok: true, targets: [{ ip: POD, rules: [] }] });
  });

  // podman runs inside `node` (PodmanBed's `netns` option: `nsenter --net`, keeping the host's mount namespace so
  // the container netns podman bind-mounts under /run/netns stays visible to its later stop/rm). The container
  // netns is podman's own fresh one; cilium-cni's host side (lxc, the endpoint route), and so all residue and its
  // cleanup, lives in `node`.
  describe.skipIf(!hasPodman() && process.env.CI !== 'true')('through podman 4.3 (running in the node netns)', () => {
    let bed: PodmanBed | undefined;
    afterEach(async () => {
      await bed?.cleanup();
      bed = undefined;
    });

    it('podman start (ADD, chained shim) cleans the residue planted in the node; ping works; the host is untouched', async () => {
      if (!hasPodman()) throw new Error('CI must have podman installed');
      const hostNat = await natListing(hostRun);
      const hostNeigh = (await execa('ip', ['neigh', 'show', 'nud', 'permanent'])).stdout;

      const n = await azureNode();
      await plantResidue(n);
      const before = await natListing(n.r);
      const neighBefore = await permanentNeigh(n.r);
      const podLines = before.split('\n').filter(isPodLine);
      expect(podLines).toHaveLength(2);

      bed = await PodmanBed.create({
        netns: n.node,
        pluginDirs: [CILIUM_DIR, n.shimBin, PLUGIN_DIR],
        env: a.agent.env(),
        confList: (dirs) => ({
          cniVersion: '0.4.0',
          name: dirs.network,
          plugins: [ciliumCni({ type: 'host-local', dataDir: dirs.dataDir, ranges: [[RANGE]] }), shimKeys({ dirs: n.dir })],
        }),
      });
      await bed.startContainer('c1');
      expect(await bed.containerIPs('c1')).toEqual([POD]);
      expect(await ledgerRecords(n.dir.stateDir, bed.network)).toHaveLength(1);

      expect(await ping(n)).toBe(0);
      expect(await natListing(n.r)).toBe(withoutLines(before, podLines));
      expect(await permanentNeigh(n.r)).toBe(withoutLines(neighBefore, [`${POD} dev azure0 lladdr 00:0d:3a:30:47:42 PERMANENT `]));

      await bed.stop('c1'); // DEL
      expect(await ledgerRecords(n.dir.stateDir, bed.network)).toEqual([]);
      expect(await natListing(hostRun)).toBe(hostNat);
      expect((await execa('ip', ['neigh', 'show', 'nud', 'permanent'])).stdout).toBe(hostNeigh);
    });
  });
});
