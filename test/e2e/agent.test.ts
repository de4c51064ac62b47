// `ipam-shim agent` as a real process: the BUILT single executable (dist/ipam-shim) started inside a network
// namespace standing for the node, with temp dirs for the CNI bin/conf/state/cache dirs, against the cilium-cni
// stand-in of the 1.17 line (its lists are 1.0.0; docs/testing.md, "The cilium-cni stand-in") with a cilium-agent
// API stand-in, delegating to Debian's host-local, driven by the project's libcni-like runner (which writes the
// result cache the agent's GC reads):
//   netns vnet (client 10.240.0.4) ── eth0 ── netns node: eth0 ⊂ bridge azure0 (10.240.0.5/16) ── lxc… ── pods
// Pods get their addresses as /32 (/128) with the router address (169.254.23.1, fd00:23::1) as gateway, and the node
// a /32 route to each through its lxc device, as cilium-cni leaves them. Pods are dual-stack (10.240.0.32–63,
// fd00:10:240::/64), so the ledger holds IPv6 addresses and the IPv6 probe rewrite is due. The agent's /metrics and /healthz are fetched with Node's fetch from inside the node netns.
import { execa } from 'execa';
import { mkdir, readdir, readFile, symlink, truncate, unlink, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runInNetns, type Run } from '../../src/effects/exec.js';
import { parseMetrics, seriesKey } from '../../src/metrics.js';
import { FIXTURE_BIN, hostLocalAllocations, PLUGIN_DIR, ROOT, scratch, SHIM, shimBinDir } from '../support/shim/cni.js';
import { inNs, rootOrSkip, TestNet, uid } from '../support/net/netns.js';
import { CniRunner } from '../support/runtimes/runner.js';
import { legacyFirstPath, podRules, vnetBridge } from '../support/net/azure-vnet.js';
import { waitFor } from '../support/wait.js';
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { ciliumCni, ciliumCniDir } from '../support/shim/cilium.js';
import { agentArgs, agentGet, followAgent, onePass, type RunningAgent } from '../support/shim/agent.js';

/** The single executable the DaemonSet's image ships. */
const AGENT = join(ROOT, 'dist/ipam-shim');
const DEAD_MAC = '0:d:3a:30:47:42';
/** AKS's cilium conflist: the agent's install step chains the shim into it. */
const AKS_CILIUM = { cniVersion: '0.3.1', name: 'cilium', plugins: [{ type: 'cilium-cni', ipam: { type: 'azure-ipam' } }] };

const enabled = rootOrSkip();
/** cilium-agent's API for the stand-in, one per test; IPv6 on, so pods keep both families. */
const cilium = useCiliumAgent({ routerIPv6: 'fd00:23::1' });
/** What cilium-cni's place holds on this node's CNI path: the 1.17 line (AKS's), which takes the 1.0.0 list. */
const CILIUM_DIR = ciliumCniDir('1.17');

type Agent = RunningAgent;

interface Bed {
  net: TestNet;
  s: Awaited<ReturnType<typeof scratch>>;
  vnet: string;
  node: string;
  r: Run;
  network: string;
  confDir: string;
  cacheDir: string;
  binDir: string;
  cniPath: string;
  runner: CniRunner;
  metricsFile: string;
  agents: Agent[];
  owners: string[];
}

async function makeBed(net: TestNet, o: { delegateType?: string; noDelegate?: boolean } = {}): Promise<Bed> {
  const s = await scratch();
  net.defer(() => s.cleanup());
  const node = await net.netns('node');
  const vnet = await vnetBridge(net, node);
  const r = runInNetns(node);

  const network = `agt${uid()}`;
  const hostLocal = {
    type: 'host-local',
    dataDir: s.dataDir,
    ranges: [[{ subnet: '10.240.0.0/16', rangeStart: '10.240.0.32', rangeEnd: '10.240.0.63' }], [{ subnet: 'fd00:10:240::/64' }]],
  };
  const metricsFile = join(s.dir, 'metrics', 'ipam-shim.prom');
  const confList = {
    cniVersion: '1.0.0',
    name: network,
    plugins: [
      ciliumCni(hostLocal),
      {
        type: 'ipam-shim',
        stateDir: s.stateDir,
        logFile: s.logFile,
        metricsFile,
        uplink: 'eth0',
        ...(o.noDelegate ? {} : { delegate: { ...hostLocal, type: o.delegateType ?? 'host-local' } }),
      },
    ],
  };
  const confDir = join(s.dir, 'net.d');
  await mkdir(confDir);
  await writeFile(join(confDir, '05-cilium.conflist'), JSON.stringify(AKS_CILIUM, null, 2));
  await writeFile(join(confDir, '10-agent.conflist'), JSON.stringify(confList, null, 2));
  const pluginBin = await shimBinDir(s.dir);
  // cilium-cni first, as on a node: the agent, agent-ip and doctor ask it VERSION there.
  const cniPath = [CILIUM_DIR, PLUGIN_DIR, FIXTURE_BIN].join(':');
  const cacheDir = join(s.dir, 'cache');
  const runner = new CniRunner({
    confList,
    pluginDirs: [CILIUM_DIR, pluginBin, PLUGIN_DIR, FIXTURE_BIN],
    cacheDir,
    netns: node,
    env: cilium.agent.env(),
  });
  const bed: Bed = {
    net,
    s,
    vnet,
    node,
    r,
    network,
    confDir,
    cacheDir,
    binDir: join(s.dir, 'opt-cni-bin'),
    cniPath,
    runner,
    metricsFile,
    agents: [],
    owners: [],
  };
  net.defer(async () => {
    for (const a of bed.agents) a.proc.kill('SIGKILL');
    await Promise.allSettled(bed.agents.map((a) => a.proc));
    for (const owner of bed.owners) await execa('ip', ['netns', 'del', `ipam-shim-agent-${owner}`], { reject: false });
  });
  return bed;
}

function startAgent(bed: Bed, args: string[], env: Record<string, string> = {}): Agent {
  const proc = execa('ip', ['netns', 'exec', bed.node, AGENT, ...agentArgs(AGENT, bed, { graceSeconds: 0 }), ...args], {
    reject: false,
    env,
    buffer: false,
  });
  const agent = followAgent(proc);
  bed.agents.push(agent);
  return agent;
}

async function metric(bed: Bed, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const { body } = await agentGet(bed.node, '/metrics');
  return parseMetrics(body).get(seriesKey(name, labels))?.value;
}

async function pod(bed: Bed, id: string, args?: string): Promise<{ ns: string; ip: string; ip6: string }> {
  const ns = await bed.net.netns('pod');
  const result: any = await bed.runner.add(id, `/run/netns/${ns}`, 'eth0', args);
  const ips = (result.ips as Array<{ address: string }>).map((i) => i.address.split('/')[0]!);
  return { ns, ip: ips.find((i) => !i.includes(':'))!, ip6: ips.find((i) => i.includes(':'))! };
}

/** A pod leaked behind the runtime's back: its cache entry and its netns gone, no DEL. */
async function leak(bed: Bed, id: string, args?: string): Promise<{ ip: string }> {
  const p = await pod(bed, id, args);
  await unlink(bed.runner.cacheFilePath(id));
  await execa('ip', ['netns', 'del', p.ns]);
  return p;
}

async function agentIp(bed: Bed, owner: string): Promise<string[]> {
  bed.owners.push(owner);
  const conflist = join(bed.confDir, '10-agent.conflist');
  const r = await execa('ip', [
    'netns',
    'exec',
    bed.node,
    SHIM,
    'agent-ip',
    'allocate',
    '--owner',
    owner,
    '--conflist',
    conflist,
    '--cni-path',
    bed.cniPath,
    '--json',
  ]);
  return JSON.parse(r.stdout).ips as string[];
}

const store = (bed: Bed) => hostLocalAllocations(bed.s.dataDir, bed.network);
const ledgerIps = async (bed: Bed): Promise<string[]> => {
  const dir = join(bed.s.stateDir, bed.network, 'records');
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith('.json') && !n.startsWith('.'));
  const recs = await Promise.all(names.map(async (n) => JSON.parse(await readFile(join(dir, n), 'utf8')) as { ips: string[] }));
  return recs.flatMap((r) => r.ips.map((ip) => ip.split('/')[0]!));
};
const ping = async (bed: Bed, ip: string) =>
  (await inNs(bed.vnet, 'ping', ['-c', '2', '-i', '0.2', '-W', '1', '-q', ip], { reject: false })).exitCode;
async function stopWithin(a: Agent, ms: number): Promise<number> {
  const t0 = Date.now();
  a.proc.kill('SIGTERM');
  const r = await a.proc;
  const took = Date.now() - t0;
  expect(r.exitCode, `exit after SIGTERM (${took} ms)`).toBe(0);
  expect(took).toBeLessThan(ms);
  return took;
}

describe.skipIf(!enabled)('ipam-shim agent (the built executable in a node netns)', () => {
  const net = new TestNet();
  afterEach(() => net.cleanup());
  let bed: Bed;
  beforeEach(async () => {
    bed = await makeBed(net);
  });

  it('apply: a leaked pod is released within two passes, live pods and agent IPs never; installs the shim; metrics count it; SIGTERM stops promptly', async () => {
    const [agentAddr] = await agentIp(bed, 'health');
    const alive = await pod(bed, 'pod-alive');
    const leaked = await leak(bed, 'pod-leaked');
    expect(await store(bed)).toContain(leaked.ip);

    const a = startAgent(bed, ['--gc', 'apply', '--interval', '1']);
    await waitFor('two passes', () => a.passes().length >= 2);
    const releasedIn = a.passes().findIndex((p) => p.released > 0);
    expect(releasedIn, JSON.stringify(a.passes())).toBeGreaterThanOrEqual(0);
    expect(releasedIn).toBeLessThan(2);
    expect(await store(bed)).not.toContain(leaked.ip);
    expect(await ledgerIps(bed)).not.toContain(leaked.ip);
    for (const ip of [agentAddr!.split('/')[0]!, alive.ip, alive.ip6]) {
      expect(await store(bed)).toContain(ip);
      expect(await ledgerIps(bed)).toContain(ip);
    }
    // A few more passes release nothing else.
    const n = a.passes().length;
    await waitFor('two more passes', () => a.passes().length >= n + 2);
    expect(
      a
        .passes()
        .slice(n)
        .every((p) => p.released === 0 && p.errors === 0),
      JSON.stringify(a.passes()),
    ).toBe(true);

    // install --watch, run by the agent: the binary and the chained entry after cilium-cni.
    await waitFor('the shim chained into the cilium conflist', async () =>
      (await readFile(join(bed.confDir, '05-cilium.conflist'), 'utf8')).includes('"ipam-shim"'),
    );
    expect((await readFile(join(bed.binDir, 'ipam-shim'))).equals(await readFile(AGENT))).toBe(true);

    expect(await agentGet(bed.node, '/healthz')).toMatchObject({ status: 200 });
    expect(await agentGet(bed.node, '/readyz')).toMatchObject({ status: 200 });
    expect(await metric(bed, 'ipam_shim_agent_gc_released_total', { network: bed.network })).toBe(1);
    expect(await metric(bed, 'ipam_shim_agent_reconcile_passes_total', { outcome: 'ok' })).toBeGreaterThanOrEqual(4);
    expect(await metric(bed, 'ipam_shim_agent_errors_total', { step: 'gc' })).toBe(0);
    expect(await metric(bed, 'ipam_shim_agent_last_pass_duration_seconds')).toBeGreaterThan(0);
    // The plugin's own counters, from its textfile (the same file node-exporter would read): two pod ADDs.
    expect(await metric(bed, 'ipam_shim_invocations_total', { network: bed.network, verb: 'ADD' })).toBe(2);
    const textfile = parseMetrics(await readFile(bed.metricsFile, 'utf8'));
    expect(textfile.get(seriesKey('ipam_shim_invocations_total', { network: bed.network, verb: 'ADD' }))?.value).toBe(2);

    await stopWithin(a, 3_000);
    expect(a.lines().at(-1)).toMatchObject({ msg: 'agent stopped' });
  });

  it('report (the default): a leaked pod is reported on every pass and never released; its record is kept for an apply that can release it', async () => {
    const alive = await pod(bed, 'pod-alive');
    // As kubelet's runtime sends them: the leak line names the pod (issue 43, item 9).
    const leaked = await leak(
      bed,
      'pod-leaked',
      'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-7f9c-x2v4q;K8S_POD_INFRA_CONTAINER_ID=pod-leaked',
    );
    const a = startAgent(bed, ['--interval', '0.5']);
    await waitFor('three passes', () => a.passes().length >= 3);
    // The delegate can release it (apply mode does): the record is that evidence, so report mode keeps it and the
    // leak stays visible (ipam_shim_agent_gc_leaked, the shipped alert) until an operator decides.
    expect(
      a.passes().every((p) => p.leaked === 1 && p.released === 0 && p.forgotten === 0),
      JSON.stringify(a.passes()),
    ).toBe(true);
    const line = a.lines().find((l) => /report mode/.test(l.msg));
    expect(line?.leaked, JSON.stringify(line)).toEqual([
      expect.objectContaining({ containerID: 'pod-leaked', pod: { namespace: 'shop', name: 'web-7f9c-x2v4q' } }),
    ]);
    expect(await store(bed)).toContain(leaked.ip);
    expect(await ledgerIps(bed)).toContain(leaked.ip);
    expect(await ledgerIps(bed)).toContain(alive.ip);
    expect(await metric(bed, 'ipam_shim_agent_gc_leaked', { network: bed.network, mode: 'report' })).toBe(1);
    expect(await metric(bed, 'ipam_shim_agent_gc_released_total', { network: bed.network })).toBe(0);
    expect(await metric(bed, 'ipam_shim_agent_gc_forgotten_total', { network: bed.network })).toBe(0);
    await stopWithin(a, 3_000);
  });

  // Issue 43, item 9: a node that has nothing wrong says so at info; warn and error are for what an operator acts on.
  it('a fresh node: the agent installs, passes and turns ready without a single warn or error line', async () => {
    // As on a node: cilium-agent has put cilium-cni into the bin dir the shim installs into, and no pod ran yet.
    await mkdir(bed.binDir, { recursive: true });
    await symlink(join(CILIUM_DIR, 'cilium-cni'), join(bed.binDir, 'cilium-cni'));
    const a = startAgent(bed, ['--interval', '0.5']);
    await waitFor('ready and three passes', async () => a.passes().length >= 3 && (await agentGet(bed.node, '/readyz')).status === 200);
    await stopWithin(a, 3_000);
    // The agent's lines name their level ("info", …); anything but trace/debug/info counts.
    const loud = a.lines().filter((l) => !['trace', 'debug', 'info'].includes(l.level));
    expect(loud, JSON.stringify(loud, null, 1)).toEqual([]);
    expect(a.lines().length).toBeGreaterThan(3);
  });

  it("residue re-added for a live pod's address is removed in one pass, decoys untouched, and the pod answers ping again", async () => {
    const live = await pod(bed, 'pod-live');
    expect(await ping(bed, live.ip)).toBe(0);
    const a = startAgent(bed, ['--interval', '3600']);
    await waitFor('the first pass', () => a.passes().length >= 1);
    // azure-vnet (still running for other pods) re-adds its rules for this address, next to decoys.
    const decoyIp = live.ip === '10.240.0.33' ? '10.240.0.34' : '10.240.0.33';
    const rules = [...podRules(live.ip, DEAD_MAC), ...podRules(decoyIp, '0:d:3a:30:47:33'), ...podRules(live.ip.slice(0, -1), '0:d:3a:30:47:30')];
    for (const rule of rules) await bed.r('ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...rule]);
    await bed.r('ip', ['neigh', 'add', decoyIp, 'lladdr', '0:d:3a:30:47:33', 'dev', 'azure0', 'nud', 'permanent']);
    await bed.r('ip', ['neigh', 'add', live.ip, 'lladdr', DEAD_MAC, 'dev', 'azure0', 'nud', 'permanent']);
    const before = (await bed.r('ebtables', ['-t', 'nat', '-L', 'PREROUTING'])).stdout;
    expect(await ping(bed, live.ip)).not.toBe(0);

    const pass = await onePass(a);
    expect(pass).toMatchObject({ residueRemoved: 3, errors: 0 });
    const after = (await bed.r('ebtables', ['-t', 'nat', '-L', 'PREROUTING'])).stdout;
    const podLine = (l: string) => new RegExp(`--(arp-)?ip-dst ${live.ip.replaceAll('.', '\\.')}(/32)? `).test(l);
    expect(after.split('\n').filter(podLine)).toEqual([]);
    // Everything else exactly as it was (the entry count line aside).
    const others = (t: string) => t.split('\n').filter((l) => !podLine(l) && !l.startsWith('Bridge chain'));
    expect(others(after)).toEqual(others(before));
    expect((await bed.r('ip', ['neigh', 'show', decoyIp, 'nud', 'permanent'])).stdout).toContain('00:0d:3a:30:47:33');
    expect((await bed.r('ip', ['neigh', 'show', live.ip, 'dev', 'azure0', 'nud', 'permanent'])).stdout).toBe('');
    expect(await ping(bed, live.ip)).toBe(0);
    expect(await metric(bed, 'ipam_shim_agent_residue_removed_total', { network: bed.network, kind: 'ebtables' })).toBe(2);
    expect(await metric(bed, 'ipam_shim_agent_residue_removed_total', { network: bed.network, kind: 'neigh' })).toBe(1);
    await stopWithin(a, 3_000);
  });

  it("the node's ebtables is ebtables-legacy, azure-vnet's rules are in ebtables-nft: one pass removes them, decoys stay, ping works", async () => {
    // The agent run with a PATH whose `ebtables` is ebtables-legacy (this kernel has no legacy nat table): before,
    // it read only that, saw "no ebtables" and left the residue (residueRemoved 0, the metric said zero).
    const env = { PATH: await legacyFirstPath(net) };
    const live = await pod(bed, 'pod-live');
    const decoyIp = live.ip === '10.240.0.33' ? '10.240.0.34' : '10.240.0.33';
    for (const rule of [...podRules(decoyIp, '0:d:3a:30:47:33'), ...podRules(live.ip, DEAD_MAC)])
      await bed.r('ebtables-nft', ['-t', 'nat', '-A', 'PREROUTING', ...rule]);
    const before = (await bed.r('ebtables-nft', ['-t', 'nat', '-L', 'PREROUTING'])).stdout;
    expect(await ping(bed, live.ip)).not.toBe(0);

    const a = startAgent(bed, ['--interval', '3600'], env);
    await waitFor('the first pass', () => a.passes().length >= 1);
    expect(a.passes()[0]).toMatchObject({ residueRemoved: 2, errors: 0 });
    const after = (await bed.r('ebtables-nft', ['-t', 'nat', '-L', 'PREROUTING'])).stdout;
    const podLine = (l: string) => new RegExp(`--(arp-)?ip-dst ${live.ip.replaceAll('.', '\\.')}(/32)? `).test(l);
    expect(after.split('\n').filter(podLine)).toEqual([]);
    const others = (t: string) => t.split('\n').filter((l) => !podLine(l) && !l.startsWith('Bridge chain'));
    expect(others(after)).toEqual(others(before));
    expect(others(after).filter((l) => l.includes(decoyIp))).toHaveLength(2);
    expect(await ping(bed, live.ip)).toBe(0);
    expect(await metric(bed, 'ipam_shim_agent_residue_removed_total', { network: bed.network, kind: 'ebtables' })).toBe(2);
    const logged = a.lines().find((l) => l.msg === 'removed stale residue');
    expect(logged?.ebtables?.map((x: any) => x.program)).toEqual(['ebtables-nft', 'ebtables-nft']);
    await stopWithin(a, 3_000);
  });

  it('never interleaves with a CNI call of the same attachment: while its lock is held, GC and residue leave it; the pass after does the work', async () => {
    const live = await pod(bed, 'pod-live');
    const leaked = await leak(bed, 'pod-leaked');
    for (const rule of podRules(live.ip, DEAD_MAC)) await bed.r('ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...rule]);
    // What an ADD or DEL of these attachments holds while it runs (Ledger.lockedAttachment): this live process's id.
    const stat = await readFile('/proc/self/stat', 'utf8');
    const holder = `${process.pid} ${stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]}`;
    const locks = ['pod-live', 'pod-leaked'].map((cid) => join(bed.s.stateDir, bed.network, `.attach-${cid}:eth0.lock`));
    for (const l of locks) await writeFile(l, holder);
    const a = startAgent(bed, ['--gc', 'apply', '--interval', '3600']);
    await waitFor('the first pass', () => a.passes().length >= 1);
    expect(a.passes()[0]).toMatchObject({ busy: 2, released: 0, residueRemoved: 0, errors: 0 });
    expect(await store(bed)).toContain(leaked.ip);
    expect((await bed.r('ebtables', ['-t', 'nat', '-L', 'PREROUTING'])).stdout).toContain(live.ip);
    for (const l of locks) await unlink(l);
    expect(await onePass(a)).toMatchObject({ busy: 0, released: 1, residueRemoved: 2, errors: 0 });
    expect(await store(bed)).not.toContain(leaked.ip);
    expect(await ping(bed, live.ip)).toBe(0);
    await stopWithin(a, 3_000);
  });

  it('the IPv6 probe table, deleted or flushed, is back after one pass', async () => {
    await pod(bed, 'pod-v6'); // its ADD installs the table (an IPv6 address was handed out)
    const table = async () => (await bed.r('nft', ['list', 'table', 'ip6', 'azureSLBProbe'], { check: false })).stdout;
    const installed = await table();
    expect(installed).toContain('fe80::1234:5678:9abc');
    const a = startAgent(bed, ['--interval', '3600']);
    await waitFor('the first pass', () => a.passes().length >= 1);
    expect(a.passes()[0]).toMatchObject({ probeRestored: false, errors: 0 });

    await bed.r('nft', ['delete', 'table', 'ip6', 'azureSLBProbe']);
    expect(await table()).toBe('');
    expect(await onePass(a)).toMatchObject({ probeRestored: true, errors: 0 });
    expect(await table()).toBe(installed);

    await bed.r('nft', ['flush', 'chain', 'ip6', 'azureSLBProbe', 'prerouting']); // drifted: the table is there, its rules are not
    expect(await onePass(a)).toMatchObject({ probeRestored: true, errors: 0 });
    expect(await table()).toBe(installed);
    expect(await metric(bed, 'ipam_shim_agent_probe_restores_total')).toBe(2);
    await stopWithin(a, 3_000);
  });
});

describe.skipIf(!enabled)('ipam-shim agent on a chained network without a delegate', () => {
  const net = new TestNet();
  afterEach(() => net.cleanup());

  it("report: a dead pod's record is forgotten (nothing of the shim's could release through it; kept, it would only wedge its address)", async () => {
    const bed = await makeBed(net, { noDelegate: true });
    const alive = await pod(bed, 'pod-alive');
    // As kubelet's runtime sends them: the leak line names the pod (issue 43, item 9).
    const leaked = await leak(
      bed,
      'pod-leaked',
      'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-7f9c-x2v4q;K8S_POD_INFRA_CONTAINER_ID=pod-leaked',
    );
    const a = startAgent(bed, ['--interval', '0.5']);
    await waitFor('three passes', () => a.passes().length >= 3);
    const [first, ...later] = a.passes();
    expect(first).toMatchObject({ leaked: 1, released: 0, forgotten: 1, errors: 0 });
    expect(
      later.every((p) => p.leaked === 0 && p.released === 0 && p.forgotten === 0),
      JSON.stringify(later),
    ).toBe(true);
    expect(a.lines().some((l) => /forgot the chained records/.test(l.msg) && l.forgotten?.[0]?.containerID === 'pod-leaked')).toBe(true);
    // Nothing released: the main IPAM (host-local behind cilium-cni) still holds it; only the shim's note of it is gone.
    expect(await store(bed)).toContain(leaked.ip);
    expect(await ledgerIps(bed)).not.toContain(leaked.ip);
    expect(await ledgerIps(bed)).toContain(alive.ip);
    expect(await metric(bed, 'ipam_shim_agent_gc_forgotten_total', { network: bed.network })).toBe(1);
    await stopWithin(a, 3_000);
  });
});

describe.skipIf(!enabled)('ipam-shim agent killed mid-pass', () => {
  const net = new TestNet();
  afterEach(() => net.cleanup());

  it('SIGKILL during releases, then a restart: every leak released once, nothing live lost', async () => {
    // The delegate is host-local behind a fixture that sleeps after each DEL it did: the kill lands between a
    // release and its ledger removal, the worst moment.
    const bed = await makeBed(net, { delegateType: 'slow-ipam' });
    const [agentAddr] = await agentIp(bed, 'health');
    const alive = await pod(bed, 'pod-alive');
    const leaks: Array<{ ip: string }> = [];
    for (let i = 0; i < 6; i++) leaks.push(await leak(bed, `pod-leak-${i}`));
    const first = startAgent(bed, ['--gc', 'apply', '--interval', '3600'], { SLOW_IPAM_DEL_AFTER: '2' });
    // Wait until host-local released some but the ledger still holds them all.
    await waitFor('the first releases', async () => (await store(bed)).filter((ip) => leaks.some((l) => l.ip === ip)).length < leaks.length);
    expect((await ledgerIps(bed)).filter((ip) => leaks.some((l) => l.ip === ip))).toHaveLength(leaks.length);
    first.proc.kill('SIGKILL');
    await first.proc;
    expect(first.passes()).toEqual([]); // killed mid-pass

    const recordedLeaks = (await ledgerIps(bed)).filter((ip) => leaks.some((l) => l.ip === ip));
    const second = startAgent(bed, ['--gc', 'apply', '--interval', '3600']);
    await waitFor('a pass', () => second.passes().length >= 1, 60_000);
    expect(second.passes()[0]).toMatchObject({ errors: 0, released: recordedLeaks.length });
    for (const l of leaks) {
      expect(await store(bed)).not.toContain(l.ip);
      expect(await ledgerIps(bed)).not.toContain(l.ip);
    }
    for (const ip of [agentAddr!.split('/')[0]!, alive.ip, alive.ip6]) {
      expect(await store(bed)).toContain(ip);
      expect(await ledgerIps(bed)).toContain(ip);
    }
    // A new pod may get a released address; the next pass keeps it (nothing is released twice).
    const fresh = await pod(bed, 'pod-fresh');
    expect(await onePass(second)).toMatchObject({ released: 0, errors: 0 });
    expect(await store(bed)).toContain(fresh.ip);
    expect(await metric(bed, 'ipam_shim_agent_gc_released_total', { network: bed.network })).toBe(recordedLeaks.length);
    // No lock or temp file of the killed agent stays behind.
    const left = (await readdir(join(bed.s.stateDir, bed.network))).filter((n) => n.includes('lock'));
    expect(left).toEqual([]);
    await stopWithin(second, 3_000);
  });

  it('SIGTERM mid-pass: the releases under way finish, no new one starts, the agent exits promptly; a restart releases the rest', async () => {
    const bed = await makeBed(net, { delegateType: 'slow-ipam' });
    const alive = await pod(bed, 'pod-alive');
    const leaks: Array<{ ip: string }> = [];
    for (let i = 0; i < 8; i++) leaks.push(await leak(bed, `pod-leak-${i}`));
    const first = startAgent(bed, ['--gc', 'apply', '--interval', '3600'], { SLOW_IPAM_DEL_AFTER: '1.5' });
    await waitFor('the first releases', async () => (await store(bed)).filter((ip) => leaks.some((l) => l.ip === ip)).length < leaks.length);
    const t0 = Date.now();
    first.proc.kill('SIGTERM');
    const r = await first.proc;
    expect(r.exitCode).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5_000);
    const pass = first.passes()[0]!;
    expect(pass).toMatchObject({ stopped: true, errors: 0 });
    // Four releases at a time: the first four finished, the other four never started.
    expect(pass.released).toBe(4);
    expect((await ledgerIps(bed)).filter((ip) => leaks.some((l) => l.ip === ip))).toHaveLength(leaks.length - 4);
    expect(first.lines().at(-1)).toMatchObject({ msg: 'agent stopped' });

    const second = startAgent(bed, ['--gc', 'apply', '--interval', '3600']);
    await waitFor('a pass', () => second.passes().length >= 1, 60_000);
    expect(second.passes()[0]).toMatchObject({ errors: 0, released: leaks.length - 4 });
    expect((await ledgerIps(bed)).filter((ip) => leaks.some((l) => l.ip === ip))).toEqual([]);
    expect(await store(bed)).toContain(alive.ip);
    await stopWithin(second, 3_000);
  });
});

/** /readyz's status and JSON body. */
async function readyz(bed: Bed): Promise<{ status: number; body: Record<string, any> }> {
  const r = await agentGet(bed.node, '/readyz');
  return { status: r.status, body: JSON.parse(r.body) as Record<string, any> };
}

describe.skipIf(!enabled)('ipam-shim agent readiness: installed where the runtime reads it, and the last pass completed', () => {
  const net = new TestNet();
  afterEach(() => net.cleanup());

  it("installing: no conflist → 503 with the reason; cilium-cni's conflist appears → the entry is chained in and a pass done → 200", async () => {
    const bed = await makeBed(net);
    const agentList = await readFile(join(bed.confDir, '10-agent.conflist'), 'utf8');
    await unlink(join(bed.confDir, '05-cilium.conflist'));
    await unlink(join(bed.confDir, '10-agent.conflist'));
    const a = startAgent(bed, ['--interval', '0.5']);
    await waitFor('two passes', () => a.passes().length >= 2);
    const none = await readyz(bed);
    expect(none.status).toBe(503);
    expect(none.body).toMatchObject({ ready: false, reason: 'not-installed', why: expect.stringContaining(`no network config in ${bed.confDir}`) });
    expect(await metric(bed, 'ipam_shim_agent_conflist_entry_in_use')).toBe(0);

    // cilium-agent writes its conflist: install --watch chains the shim into it, the next pass completes.
    await writeFile(join(bed.confDir, '10-agent.conflist'), agentList);
    await writeFile(join(bed.confDir, '05-cilium.conflist'), JSON.stringify(AKS_CILIUM, null, 2));
    await waitFor('/readyz 200', async () => (await readyz(bed)).status === 200);
    expect((await readyz(bed)).body).toMatchObject({ ready: true, conflist: join(bed.confDir, '05-cilium.conflist'), lastPass: { completed: true } });
    expect(await readFile(join(bed.confDir, '05-cilium.conflist'), 'utf8')).toContain('"ipam-shim"');
    expect(await metric(bed, 'ipam_shim_agent_conflist_entry_in_use')).toBe(1);
    await stopWithin(a, 3_000);
  });

  it('--no-install (Cilium writes the list from its ConfigMap): verified, never edited; entry removed → 503; pass failing → 503', async () => {
    const bed = await makeBed(net);
    const cilium = join(bed.confDir, '05-cilium.conflist');
    const withShim = JSON.stringify(
      { ...AKS_CILIUM, plugins: [...AKS_CILIUM.plugins, { type: 'ipam-shim', delegate: { type: 'azure-ipam' } }] },
      null,
      2,
    );
    await writeFile(cilium, withShim);
    const a = startAgent(bed, ['--interval', '0.5', '--no-install']);
    await waitFor('/readyz 200', async () => (await readyz(bed)).status === 200);
    expect(await metric(bed, 'ipam_shim_agent_conflist_entry_in_use')).toBe(1);

    // cilium-agent rewrites its list without the entry (an operator dropped it from the ConfigMap): reported, not edited.
    const without = JSON.stringify(AKS_CILIUM, null, 2);
    await writeFile(cilium, without);
    const n = a.passes().length;
    await waitFor('two more passes', () => a.passes().length >= n + 2);
    const missing = await readyz(bed);
    expect(missing.status).toBe(503);
    expect(missing.body).toMatchObject({
      ready: false,
      reason: 'not-installed',
      conflist: cilium,
      why: expect.stringContaining('holds no ipam-shim entry'),
    });
    expect(await metric(bed, 'ipam_shim_agent_conflist_entry_in_use')).toBe(0);
    expect(a.lines().some((l) => l.level === 'warn' && /installing is disabled: only verified/.test(l.msg))).toBe(true);
    expect(await readFile(cilium, 'utf8')).toBe(without);
    expect(await readdir(bed.binDir).catch(() => [])).toEqual([]); // nothing installed either

    // The entry is back but the shim's own network is gone: the pass cannot complete.
    await writeFile(cilium, withShim);
    await unlink(join(bed.confDir, '10-agent.conflist'));
    const m = a.passes().length;
    await waitFor('two more passes', () => a.passes().length >= m + 2);
    const failing = await readyz(bed);
    expect(failing.status).toBe(503);
    expect(failing.body).toMatchObject({ ready: false, reason: 'pass-incomplete', why: expect.stringContaining('no conflist with ipam-shim found') });
    await stopWithin(a, 3_000);
  });
});

/** kubelet's CNI_ARGS for a pod (IgnoreUnknown: the reference plugins refuse unknown keys otherwise). */
const k8sArgs = (namespace: string, name: string, id: string) =>
  `IgnoreUnknown=1;K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${name};K8S_POD_INFRA_CONTAINER_ID=${id}`;

/**
 * A pod started while the shim was not in the chain: the same network through the same libcni-like runner and
 * result cache, but a list holding only cilium-cni (+ host-local). The shim's ledger never hears of it.
 */
async function podOutsideChain(bed: Bed, id: string, namespace: string, name: string): Promise<{ ns: string; ip: string }> {
  const list = JSON.parse(await readFile(join(bed.confDir, '10-agent.conflist'), 'utf8')) as { plugins: Array<{ type: string }> };
  const without = { ...list, plugins: list.plugins.filter((p) => p.type !== 'ipam-shim') };
  const runner = new CniRunner({
    confList: without,
    pluginDirs: [CILIUM_DIR, PLUGIN_DIR, FIXTURE_BIN],
    cacheDir: bed.cacheDir,
    netns: bed.node,
    env: cilium.agent.env(),
  });
  const ns = await bed.net.netns('pod');
  const result: any = await runner.add(id, `/run/netns/${ns}`, 'eth0', { args: k8sArgs(namespace, name, id) });
  const ip = (result.ips as Array<{ address: string }>).map((i) => i.address.split('/')[0]!).find((i) => !i.includes(':'))!;
  return { ns, ip };
}

describe.skipIf(!enabled)('ipam-shim agent: every pod the runtime knows, not only the ledger', () => {
  const net = new TestNet();
  afterEach(() => net.cleanup());

  it('a pod started outside the chain: its residue is gone within one pass (decoys stay), the VNet host pings it; counted as unseen', async () => {
    const bed = await makeBed(net);
    const seen = await pod(bed, 'pod-seen');
    const outside = await podOutsideChain(bed, 'pod-outside', 'team-a', 'web-1');
    expect(await ledgerIps(bed)).not.toContain(outside.ip);
    // azure-vnet's leftovers for the pod's address, next to decoys (other addresses, and a prefix of this one).
    const decoyIp = [outside.ip, seen.ip].includes('10.240.0.40') ? '10.240.0.41' : '10.240.0.40';
    const rules = [
      ...podRules(outside.ip, DEAD_MAC),
      ...podRules(decoyIp, '0:d:3a:30:47:33'),
      ...podRules(outside.ip.slice(0, -1), '0:d:3a:30:47:30'),
    ];
    for (const rule of rules) await bed.r('ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...rule]);
    await bed.r('ip', ['neigh', 'add', decoyIp, 'lladdr', '0:d:3a:30:47:33', 'dev', 'azure0', 'nud', 'permanent']);
    await bed.r('ip', ['neigh', 'add', outside.ip, 'lladdr', DEAD_MAC, 'dev', 'azure0', 'nud', 'permanent']);
    const before = (await bed.r('ebtables', ['-t', 'nat', '-L', 'PREROUTING'])).stdout;
    expect(await ping(bed, outside.ip)).not.toBe(0);

    const a = startAgent(bed, ['--interval', '3600']);
    await waitFor('the first pass', () => a.passes().length >= 1);
    expect(a.passes()[0]).toMatchObject({ runtimePods: 2, unseenPods: 1, reservedPods: 0, residueRemoved: 3, errors: 0 });
    const after = (await bed.r('ebtables', ['-t', 'nat', '-L', 'PREROUTING'])).stdout;
    const podLine = (l: string) => new RegExp(`--(arp-)?ip-dst ${outside.ip.replaceAll('.', '\\.')}(/32)? `).test(l);
    expect(after.split('\n').filter(podLine)).toEqual([]);
    const others = (t: string) => t.split('\n').filter((l) => !podLine(l) && !l.startsWith('Bridge chain'));
    expect(others(after)).toEqual(others(before));
    expect((await bed.r('ip', ['neigh', 'show', decoyIp, 'nud', 'permanent'])).stdout).toContain('00:0d:3a:30:47:33');
    expect((await bed.r('ip', ['neigh', 'show', outside.ip, 'dev', 'azure0', 'nud', 'permanent'])).stdout).toBe('');
    expect(await ping(bed, outside.ip)).toBe(0);
    expect(a.lines().some((l) => /never saw/.test(l.msg) && l.new?.[0]?.pod === 'team-a/web-1')).toBe(true);
    expect(await metric(bed, 'ipam_shim_agent_unseen_pods', { network: bed.network })).toBe(1);
    expect(await metric(bed, 'ipam_shim_agent_runtime_pods', { network: bed.network })).toBe(2);
    expect(await metric(bed, 'ipam_shim_agent_runtime_cache_readable', { network: bed.network })).toBe(1);
    expect(await metric(bed, 'ipam_shim_agent_residue_removed_total', { network: bed.network, kind: 'ebtables' })).toBe(2);
    // Nothing of the pod is in the shim's books after it either: the agent only cleaned.
    expect(await ledgerIps(bed)).not.toContain(outside.ip);
    await stopWithin(a, 3_000);
  });

  it('a pod holding a reserved address: reported with its namespace/name (log, metric, doctor), never touched', async () => {
    const bed = await makeBed(net);
    const outside = await podOutsideChain(bed, 'pod-reserved', 'team-b', 'db-0');
    // The operator reserves the subnet the pod's address lies in (a firewall's, say) after the pod started.
    const file = join(bed.confDir, '10-agent.conflist');
    const list = JSON.parse(await readFile(file, 'utf8'));
    list.plugins[1].reservedCIDRs = [`${outside.ip}/32`];
    await writeFile(file, JSON.stringify(list, null, 2));
    // Rules naming the reserved address may be its real owner's: they stay.
    for (const rule of podRules(outside.ip, DEAD_MAC)) await bed.r('ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...rule]);
    const before = (await bed.r('ebtables', ['-t', 'nat', '-L', 'PREROUTING'])).stdout;
    const addr = async () => (await inNs(outside.ns, 'ip', ['-4', '-o', 'addr', 'show', 'dev', 'eth0'])).stdout;
    const addrBefore = await addr();

    const a = startAgent(bed, ['--interval', '3600', '--gc', 'apply']);
    await waitFor('the first pass', () => a.passes().length >= 1);
    expect(a.passes()[0]).toMatchObject({ runtimePods: 1, unseenPods: 1, reservedPods: 1, residueRemoved: 0, released: 0, errors: 0 });
    const line = a.lines().find((l) => l.reservedCIDR === `${outside.ip}/32`);
    expect(line).toMatchObject({ level: 'warn', namespace: 'team-b', name: 'db-0', containerID: 'pod-reserved', ip: outside.ip });
    expect(line!.msg).toContain('team-b/db-0');
    expect(await metric(bed, 'ipam_shim_agent_reserved_pods', { network: bed.network })).toBe(1);
    expect((await bed.r('ebtables', ['-t', 'nat', '-L', 'PREROUTING'])).stdout).toBe(before);
    expect(await addr()).toBe(addrBefore);
    expect(await store(bed)).toContain(outside.ip);

    const doctor = await execa(
      'ip',
      [
        'netns',
        'exec',
        bed.node,
        SHIM,
        'doctor',
        '--conf-dir',
        bed.confDir,
        '--network',
        bed.network,
        '--cni-path',
        bed.cniPath,
        '--cache-dir',
        bed.cacheDir,
        '--json',
      ],
      { reject: false },
    );
    const findings = (JSON.parse(doctor.stdout).findings as Array<{ check: string; verdict: string; summary: string }>).filter(
      (f) => f.check === 'runtime-pods',
    );
    expect(findings).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          verdict: 'problem',
          summary: expect.stringContaining(`pod team-b/db-0 (pod-reserved) holds ${outside.ip}, inside reserved CIDR ${outside.ip}/32`),
        }),
        expect.objectContaining({ verdict: 'warn', summary: expect.stringContaining('1 pod(s) the runtime knows were never seen by the shim') }),
      ]),
    );
    expect(doctor.exitCode).toBe(1);
    await stopWithin(a, 3_000);
  });

  it('an unreadable cache is "could not look", not zero pods: the step fails, the gauges are absent, readability is 0', async () => {
    const bed = await makeBed(net);
    await pod(bed, 'pod-seen');
    await writeFile(
      join(bed.cacheDir, 'results', `${bed.network}-broken-eth0`),
      `{"kind":"cniCacheV1","networkName":"${bed.network}","containerId":`,
    );
    const a = startAgent(bed, ['--interval', '3600']);
    await waitFor('the first pass', () => a.passes().length >= 1);
    expect(a.passes()[0]).toMatchObject({ steps: { pods: 'error' } });
    expect(a.passes()[0]!.unseenPods).toBeUndefined();
    expect(await metric(bed, 'ipam_shim_agent_runtime_cache_readable', { network: bed.network })).toBe(0);
    expect(await metric(bed, 'ipam_shim_agent_unseen_pods', { network: bed.network })).toBeUndefined();
    expect(await metric(bed, 'ipam_shim_agent_errors_total', { step: 'pods' })).toBe(1);
    await stopWithin(a, 3_000);
  });
});

describe.skipIf(!enabled)("ipam-shim agent: a cache entry cannot make it remove the node's own plumbing", () => {
  const net = new TestNet();
  afterEach(() => net.cleanup());

  /** A cache entry for `id` naming `ips`: a copy of a real one (libcni's shape) with the addresses replaced (/32, /128: cilium-cni's). */
  async function rogueEntry(bed: Bed, from: string, id: string, ips: string[]): Promise<void> {
    const dir = join(bed.cacheDir, 'results');
    const entry = JSON.parse(await readFile(join(dir, `${bed.network}-${from}-eth0`), 'utf8'));
    entry.containerId = id;
    entry.cniArgs = [];
    entry.result.ips = ips.map((ip) => ({ address: `${ip}/${ip.includes(':') ? 128 : 32}` }));
    await writeFile(join(dir, `${bed.network}-${id}-eth0`), JSON.stringify(entry));
  }

  /**
   * The node's plumbing, residue-shaped: the node IP's ARP responder (azure0's MAC), a second node address inside
   * the pod range (10.240.0.60 and fd00:10:240::ff on azure0) with rules to a foreign MAC and a PERMANENT entry, an
   * in-range address answered with the node's own MAC (10.240.0.61), the pods' gateway's rule and PERMANENT entry (the
   * router address, 169.254.23.1: the node holds it, on each lxc here, on cilium_host in Cilium), an in-range router the
   * node routes through (10.240.0.62), another network's PERMANENT entry and rule (192.168.77.7 on other0).
   */
  async function nodePlumbing(bed: Bed): Promise<{ ips: string[] }> {
    const r = bed.r;
    const router = cilium.agent.routerIPv4;
    const azureMac = (JSON.parse((await r('ip', ['-j', 'link', 'show', 'azure0'])).stdout) as Array<{ address: string }>)[0]!.address;
    await r('ip', ['addr', 'add', '10.240.0.60/32', 'dev', 'azure0']);
    await r('ip', ['addr', 'add', 'fd00:10:240::ff/128', 'dev', 'azure0', 'nodad']);
    // A router inside the pod range: a next hop of the node, which holds no such address.
    await r('ip', ['route', 'add', '198.51.100.0/24', 'via', '10.240.0.62', 'dev', 'azure0']);
    await r('ip', ['link', 'add', 'other0', 'type', 'bridge']);
    await r('ip', ['addr', 'add', '192.168.77.1/24', 'dev', 'other0']);
    await r('ip', ['link', 'set', 'other0', 'up']);
    const rules = [
      ['-p', 'ARP', '--arp-op', 'Request', '--arp-ip-dst', '10.240.0.5', '-j', 'arpreply', '--arpreply-mac', azureMac],
      ['-p', 'ARP', '--arp-op', 'Request', '--arp-ip-dst', '10.240.0.61', '-j', 'arpreply', '--arpreply-mac', azureMac],
      ['-p', 'ARP', '--arp-op', 'Request', '--arp-ip-dst', router, '-j', 'arpreply', '--arpreply-mac', '12:34:56:78:9a:bc'],
      ['-p', 'ARP', '--arp-op', 'Request', '--arp-ip-dst', '10.240.0.62', '-j', 'arpreply', '--arpreply-mac', '12:34:56:78:9a:bd'],
      ...podRules('10.240.0.60', '0:d:3a:30:47:60'),
      ['-p', 'IPv6', '-i', 'eth0', '--ip6-dst', 'fd00:10:240::ff', '-j', 'dnat', '--to-dst', '0:d:3a:30:47:61', '--dnat-target', 'ACCEPT'],
      ...podRules('192.168.77.7', '0:d:3a:30:47:77'),
    ];
    for (const rule of rules) await r('ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...rule]);
    for (const [ip, mac, dev] of [
      [router, '12:34:56:78:9a:bc', 'azure0'],
      ['10.240.0.62', '12:34:56:78:9a:bd', 'azure0'],
      ['10.240.0.60', '0:d:3a:30:47:60', 'azure0'],
      ['192.168.77.7', '0:d:3a:30:47:77', 'other0'],
    ] as const)
      await r('ip', ['neigh', 'add', ip, 'lladdr', mac, 'dev', dev, 'nud', 'permanent']);
    return { ips: ['10.240.0.5', '10.240.0.60', 'fd00:10:240::ff', '10.240.0.61', router, '10.240.0.62', '192.168.77.7'] };
  }

  const permanent = async (bed: Bed) => (await bed.r('ip', ['neigh', 'show', 'nud', 'permanent'])).stdout;
  const nat = async (bed: Bed) => (await bed.r('ebtables', ['-t', 'nat', '-L', 'PREROUTING'])).stdout;

  it("the node's addresses, its gateway, rules to its MACs and another network's entries stay; a real unseen pod is still cured", async () => {
    // Before: the agent cleaned for every address the entry named: the plumbing went with the pod's residue.
    const bed = await makeBed(net);
    const outside = await podOutsideChain(bed, 'pod-outside', 'team-a', 'web-1');
    const plumbing = await nodePlumbing(bed);
    await rogueEntry(bed, 'pod-outside', 'pod-rogue', plumbing.ips);
    for (const rule of podRules(outside.ip, DEAD_MAC)) await bed.r('ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...rule]);
    await bed.r('ip', ['neigh', 'add', outside.ip, 'lladdr', DEAD_MAC, 'dev', 'azure0', 'nud', 'permanent']);
    const natBefore = await nat(bed);
    const neighBefore = await permanent(bed);
    expect(await ping(bed, outside.ip)).not.toBe(0);

    const a = startAgent(bed, ['--interval', '3600']);
    await waitFor('the first pass', () => a.passes().length >= 1);
    expect(a.passes()[0]).toMatchObject({ unseenPods: 2, residueRemoved: 3, residueRefused: 6, errors: 0 });
    const podLine = (l: string) => new RegExp(`--(arp-)?ip-dst ${outside.ip.replaceAll('.', '\\.')}(/32)? `).test(l);
    const natAfter = await nat(bed);
    expect(natAfter.split('\n').filter(podLine)).toEqual([]);
    const others = (t: string) => t.split('\n').filter((l) => !podLine(l) && !l.startsWith('Bridge chain'));
    expect(others(natAfter)).toEqual(others(natBefore));
    const neighOthers = (t: string) => t.split('\n').filter((l) => !l.startsWith(`${outside.ip} `));
    expect(neighOthers(await permanent(bed))).toEqual(neighOthers(neighBefore));
    expect(await permanent(bed)).not.toContain(`${outside.ip} dev azure0`);
    expect(await ping(bed, outside.ip)).toBe(0);
    // Why each address was left: logged with the pod it came from.
    const refused = a.lines().find((l) => /cannot be a pod's of this network/.test(l.msg));
    expect(Object.fromEntries(refused!.refused.map((x: any) => [x.ip, x.kind]))).toEqual({
      '10.240.0.5': 'node-address',
      '10.240.0.60': 'node-address',
      'fd00:10:240::ff': 'node-address',
      [cilium.agent.routerIPv4]: 'node-address',
      '10.240.0.62': 'next-hop',
      '192.168.77.7': 'outside-ranges',
    });
    // 10.240.0.61 is in range and the node's own by none of its addresses: judged, and its one rule (to azure0's MAC) spared.
    expect(natAfter).toContain('--arp-ip-dst 10.240.0.61 ');
    await stopWithin(a, 3_000);
  });

  it("the node's addresses cannot be read: no unseen pod's address is cleaned that pass, and the pass says so", async () => {
    const bed = await makeBed(net);
    const outside = await podOutsideChain(bed, 'pod-outside', 'team-a', 'web-1');
    for (const rule of podRules(outside.ip, DEAD_MAC)) await bed.r('ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...rule]);
    const natBefore = await nat(bed);
    // An `ip` that fails to list addresses (and runs everything else): first on the agent's PATH.
    const dir = join(bed.s.dir, 'broken-ip');
    await mkdir(dir);
    const real = (await execa('sh', ['-c', 'command -v ip'])).stdout.trim();
    await writeFile(
      join(dir, 'ip'),
      `#!/bin/sh\nfor a; do [ "$a" = addr ] && { echo "ip: cannot list addresses" >&2; exit 2; }; done\nexec ${real} "$@"\n`,
      {
        mode: 0o755,
      },
    );
    const a = startAgent(bed, ['--interval', '3600'], { PATH: `${dir}:${process.env.PATH}` });
    await waitFor('the first pass', () => a.passes().length >= 1);
    expect(a.passes()[0]).toMatchObject({ residueRemoved: 0, steps: { residue: 'error' } });
    expect(await nat(bed)).toBe(natBefore);
    expect(
      a
        .lines()
        .some((l) => l.level === 'error' && /addresses could not be read: the addresses of pods the shim never saw are not cleaned/.test(l.msg)),
    ).toBe(true);
    await stopWithin(a, 3_000);
  });
});

/** The agent's peak resident memory (VmHWM), MiB: `ip netns exec` execs the agent, so the child's pid is the agent's. */
const peakRssMiB = async (a: Agent): Promise<number> =>
  Number(/^VmHWM:\s+(\d+) kB/m.exec(await readFile(`/proc/${a.proc.pid}/status`, 'utf8'))![1]) / 1024;

/** deploy/daemonset.yaml's memory limit for the agent container. */
const DAEMONSET_LIMIT_MIB = 384;

describe.skipIf(!enabled)("ipam-shim agent: the runtime's result cache is untrusted input (issue 34)", () => {
  const net = new TestNet();
  afterEach(() => net.cleanup());

  it('an entry whose container ID climbs out of the state dir is ignored by name: no lock or file outside it is touched', async () => {
    const bed = await makeBed(net);
    await pod(bed, 'pod-seen');
    const results = join(bed.cacheDir, 'results');
    // The unseen pod's lock was <stateDir>/<net>/.attach-<cid>:<ifname>.lock: this one is <scratch>/victim/x:eth0.lock,
    // and the stale-lock breaker unlinked what it found there.
    const victimDir = join(bed.s.dir, 'victim');
    await mkdir(victimDir);
    const victim = join(victimDir, 'x:eth0.lock');
    await writeFile(victim, 'not a lock holder\n');
    const evilIp = '10.240.0.50';
    await writeFile(
      join(results, `${bed.network}-evil-eth0`),
      JSON.stringify({
        kind: 'cniCacheV1',
        containerId: 'a/../../../victim/x',
        ifName: 'eth0',
        networkName: bed.network,
        result: { cniVersion: '1.0.0', ips: [{ address: `${evilIp}/32` }] },
      }),
    );
    // Residue for its address, so the residue step would clean it under the attachment's lock.
    await bed.r('ip', ['neigh', 'add', evilIp, 'lladdr', DEAD_MAC, 'dev', 'azure0', 'nud', 'permanent']);
    const a = startAgent(bed, ['--interval', '3600', '--no-install']);
    await waitFor('the first pass', () => a.passes().length >= 1);
    expect(await readdir(victimDir)).toEqual(['x:eth0.lock']);
    expect(await readFile(victim, 'utf8')).toBe('not a lock holder\n');
    expect(a.passes()[0]).toMatchObject({
      steps: { gc: 'ok', pods: 'ok', residue: 'ok' },
      runtimePods: 1,
      unseenPods: 0,
      cacheIgnored: 1,
      errors: 0,
    });
    const warned = a.lines().find((l) => /libcni would refuse/.test(l.msg));
    expect(warned).toMatchObject({
      level: 'warn',
      count: 1,
      new: [{ file: `${bed.network}-evil-eth0`, why: expect.stringMatching(/^containerId must match/) }],
    });
    // Not the agent's to clean: the neighbour stays.
    expect((await bed.r('ip', ['neigh', 'show', evilIp, 'dev', 'azure0'])).stdout).toContain(evilIp);
    // Logged when it first appears, not every pass.
    await onePass(a);
    expect(a.lines().filter((l) => /libcni would refuse/.test(l.msg))).toHaveLength(1);
    await stopWithin(a, 3_000);
  });

  it('a FIFO and a symlink (to a root-only file) in the cache: every pass completes, named by file, never quoted; /readyz 200; SIGTERM ends it', async () => {
    const bed = await makeBed(net);
    await pod(bed, 'pod-seen');
    const results = join(bed.cacheDir, 'results');
    const fifo = join(results, `${bed.network}-fifo-eth0`);
    await execa('mkfifo', [fifo]);
    net.defer(async () => {
      // The code before this change blocked in open() on it: a writer's open lets a stuck reader go.
      await execa('sh', ['-c', 'exec 3<>"$1"', 'sh', fifo], { reject: false });
    });
    const secret = join(bed.s.dir, 'secret');
    await writeFile(secret, 'TOPSECRET-0123456789', { mode: 0o600 });
    const link = join(results, `${bed.network}-link-eth0`);
    await symlink(secret, link);
    const a = startAgent(bed, ['--interval', '0.5']);
    await waitFor('two passes', () => a.passes().length >= 2, 20_000);
    for (const p of a.passes()) expect(p).toMatchObject({ steps: { network: 'ok', gc: 'error', pods: 'error' } });
    await waitFor('/readyz 200', async () => (await readyz(bed)).status === 200, 20_000);
    const text = JSON.stringify(a.lines());
    expect(text).not.toContain('TOPSECRET');
    // The file JSON-quoted in the message (one line whatever its name holds), so \" inside the JSON log line.
    expect(text).toMatch(
      /cannot read runtime cache \\"[^"]*-(fifo|link)-eth0\\": (is not a regular file \(a FIFO\)|is a symbolic link \(not followed\))/,
    );
    expect(await metric(bed, 'ipam_shim_agent_runtime_cache_readable', { network: bed.network })).toBe(0);
    // Gone: the next pass reads the cache again.
    await unlink(fifo);
    await unlink(link);
    const n = a.passes().length;
    await waitFor('a pass after', () => a.passes().length >= n + 2);
    expect(a.passes().at(-1)).toMatchObject({ steps: { gc: 'ok', pods: 'ok' }, runtimePods: 1, errors: 0 });
    expect(await metric(bed, 'ipam_shim_agent_runtime_cache_readable', { network: bed.network })).toBe(1);
    await stopWithin(a, 3_000);
  });

  it(`a 1 GB cache file, then more entries than a pass reads: "could not look", and the agent stays far below its ${DAEMONSET_LIMIT_MIB} MiB limit`, async () => {
    const bed = await makeBed(net);
    await pod(bed, 'pod-seen');
    const results = join(bed.cacheDir, 'results');
    const big = join(results, `${bed.network}-big-eth0`);
    await writeFile(big, '');
    await truncate(big, 1e9); // sparse: no disk, but a read of it is 1 GB of the reader's memory
    const a = startAgent(bed, ['--interval', '3600', '--no-install']);
    await waitFor('the first pass', () => a.passes().length >= 1, 60_000);
    expect(await peakRssMiB(a)).toBeLessThan(DAEMONSET_LIMIT_MIB / 2);
    expect(a.passes()[0]).toMatchObject({ steps: { gc: 'error', pods: 'error' } });
    expect(JSON.stringify(a.lines())).toContain(`${bed.network}-big-eth0\\": is 1000000000 bytes, more than the 1048576 a cache entry may be`);
    await unlink(big);
    const entry = (i: number) => JSON.stringify({ kind: 'cniCacheV1', containerId: `p${i}`, ifName: 'eth0', networkName: bed.network, result: {} });
    for (let i = 0; i <= 10_000; i++) await writeFile(join(results, `${bed.network}-p${i}-eth0`), entry(i));
    const pass = await onePass(a);
    expect(await peakRssMiB(a)).toBeLessThan(DAEMONSET_LIMIT_MIB / 2);
    expect(pass).toMatchObject({ steps: { gc: 'error', pods: 'error' } });
    expect(JSON.stringify(a.lines())).toContain(`holds more than the 10000 entries of network ${bed.network}`);
    await stopWithin(a, 3_000);
  });
});

describe.skipIf(!enabled)('ipam-shim agent: what an operator names, and a failed agent-ip (issue 45)', () => {
  const net = new TestNet();
  afterEach(() => net.cleanup());

  it('a FIFO at metricsFile: /metrics answered within 5 s with every error series at 0, passes go on, said once, SIGTERM prompt', async () => {
    const bed = await makeBed(net);
    await mkdir(dirname(bed.metricsFile), { recursive: true });
    await execa('mkfifo', [bed.metricsFile]);
    const a = startAgent(bed, ['--interval', '0.5']);
    await waitFor('two passes', () => a.passes().length >= 2);
    for (let i = 0; i < 6; i++) {
      const t0 = Date.now();
      const { status, body } = await withinMs(agentGet(bed.node, '/metrics'), 5_000, 'a scrape');
      expect(status).toBe(200);
      expect(Date.now() - t0).toBeLessThan(5_000);
      const m = parseMetrics(body);
      // The plugin never wrote a series: the error series are the agent's zeros for the network its pass opened.
      expect(m.get(seriesKey('ipam_shim_errors_total', { network: bed.network, verb: 'ADD', code: '7' }))?.value).toBe(0);
      expect(m.get(seriesKey('ipam_shim_errors_total', { network: bed.network, verb: 'STATUS', code: '50' }))?.value).toBe(0);
    }
    const n = a.passes().length;
    await waitFor('two more passes after the scrapes', () => a.passes().length >= n + 2);
    const said = a.lines().filter((l) => /textfile not read/.test(l.msg));
    expect(said, JSON.stringify(said)).toHaveLength(1);
    expect(said[0]).toMatchObject({ level: 'warn', metricsFile: bed.metricsFile });
    await stopWithin(a, 3_000);
  });

  it('agent-ip allocate with its delegate missing: code 7, and nothing left behind (no namespace, no record)', async () => {
    const bed = await makeBed(net, { delegateType: 'no-such-ipam' });
    const owner = `miss${uid()}`.slice(0, 20);
    bed.owners.push(owner);
    const conflist = join(bed.confDir, '10-agent.conflist');
    const r = await execa(
      'ip',
      ['netns', 'exec', bed.node, SHIM, 'agent-ip', 'allocate', '--owner', owner, '--conflist', conflist, '--cni-path', bed.cniPath, '--json'],
      { reject: false },
    );
    expect(r.exitCode, `${r.stdout} ${r.stderr}`).toBe(3);
    expect(JSON.parse(r.stdout)).toMatchObject({ code: 7, error: expect.stringMatching(/no-such-ipam/) });
    expect(existsSync(`/run/netns/ipam-shim-agent-${owner}`), 'the namespace it made').toBe(false);
    const list = await execa('ip', ['netns', 'exec', bed.node, SHIM, 'agent-ip', 'list', '--conflist', conflist, '--json']);
    expect(JSON.parse(list.stdout)).toEqual({ network: bed.network, agentIPs: [] });
    expect(await ledgerIps(bed)).toEqual([]);
  });

  it("agent-ip allocate whose delegate's ADD fails: the error, and nothing left behind (no namespace, no intent record)", async () => {
    const bed = await makeBed(net, { delegateType: 'fake-ipam' });
    const owner = `bad${uid()}`.slice(0, 20);
    bed.owners.push(owner);
    const conflist = join(bed.confDir, '10-agent.conflist');
    const r = await execa(
      'ip',
      ['netns', 'exec', bed.node, SHIM, 'agent-ip', 'allocate', '--owner', owner, '--conflist', conflist, '--cni-path', bed.cniPath, '--json'],
      { reject: false, env: { FAKE_IPAM_MODE: 'garbage' } },
    );
    expect(r.exitCode, `${r.stdout} ${r.stderr}`).not.toBe(0);
    expect(existsSync(`/run/netns/ipam-shim-agent-${owner}`), 'the namespace it made').toBe(false);
    const list = await execa('ip', ['netns', 'exec', bed.node, SHIM, 'agent-ip', 'list', '--conflist', conflist, '--json']);
    expect(JSON.parse(list.stdout)).toEqual({ network: bed.network, agentIPs: [] });
    expect(await readdir(join(bed.s.stateDir, bed.network, 'records')).catch(() => [])).toEqual([]);
  });
});

/** `p`, or a failure naming `what` after `ms`. */
async function withinMs<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} unanswered after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}
