// The whole node through the real parts: the node image (built as `npm run image` builds it) run under podman the
// way deploy/daemonset.yaml runs it — with the DaemonSet's own securityContext (the podman flags
// test/support/deploy/daemonset.ts derives from the manifest: its capabilities after drop ALL, the default seccomp profile,
// a read-only root; never privileged), in the network of the namespace standing for the node, the DaemonSet's host
// paths being the CRI bed's own dirs (containerd's CNI bin and conf dirs, the host's /var/lib/cni where the bed's
// containerd keeps libcni's result cache, /run/netns with rslave propagation so pod namespaces created later are
// seen, a temp dir for the log directory) — running `agent` with a short interval (`--gc report`, then `apply`), while
// containerd (the CRI bed) starts pods on that node through CRI. The shim's stateDir and log (a temp dir of this test)
// and host-local's dataDir (the bed's) are mounted at their own paths inside, so the plugin run by containerd and the
// agent in the container share one ledger and one store. (The stateDir is not the bed's: the bed's crash kills every
// process whose command line names its dir, and the agent's --shim-config names the stateDir.)
// A second test adds Azure's LB beside the node and a dual-stack pod: the agent keeps the IPv6 probe table
// (ip6 azureSLBProbe) in place, so a flushed table is back within one pass and the LB's probe is answered.
// A third has GC enter pods' namespaces (setns): an attachment missing from the runtime's cache is released only when
// its namespace no longer holds its address.
// The DaemonSet's capabilities were found with these tests (docs/operations.md#privileges): each one's steps fail
// without it.
import { execa } from 'execa';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../scripts/image/build-image.js';
import { hostLocalAllocations, ledgerRecords, PLUGIN_DIR } from '../support/shim/cni.js';
import { hasContainerd } from '../support/runtimes/cri/bed.js';
import { hostLocal } from '../support/runtimes/cri/conflists.js';
import { ciliumCni } from '../support/shim/cilium.js';
import { ping, PROBE_SOURCE, watchPodInput } from '../support/net/probe-topology.js';
import { runInNetns } from '../../src/effects/exec.js';
import { PROBE_TABLE } from '../../src/probe-rewrite/ruleset.js';
import { useCriBed } from '../support/runtimes/cri/suite.js';
import { inNs, uid } from '../support/net/netns.js';
import { buildTestImage, nodeImagePrerequisites } from '../support/deploy/node-image.js';
import { PodmanBed } from '../support/runtimes/podman.js';
import { podRules, vnetBridge } from '../support/net/azure-vnet.js';
import { capabilityNames, daemonSet, podmanMountArgs, podmanSecurityArgs } from '../support/deploy/daemonset.js';
import { waitFor as waitForEvery } from '../support/wait.js';

const enabled = nodeImagePrerequisites('the whole-node test', { 'containerd, runc and busybox-static (scripts/install-deps.sh)': hasContainerd() });

const ENTRYPOINT = '/usr/local/bin/ipam-shim';
const CNI_CACHE = '/var/lib/cni';
const INTERVAL_S = 2;
const RANGES = [[{ subnet: '10.240.0.0/16', rangeStart: '10.240.0.32', rangeEnd: '10.240.0.63' }]];
const DEAD_MAC = '0:d:3a:30:47:42';
/** An address no pod has (host-local hands out .32 upwards): its rules are a decoy the agent must leave. */
const DECOY = '10.240.0.61';
const GRACE_S = 2;
/** The IPv6 range the probe test adds (the LB namespace routes it via the node). */
const V6_RANGE = 'fd00:10:240::/64';
const sha = async (p: string) =>
  createHash('sha256')
    .update(await readFile(p))
    .digest('hex');

/** Polls every 200 ms (podman, containerd and the scrape are not free). */
const waitFor = (what: string, pred: () => Promise<boolean> | boolean, ms = 30_000) => waitForEvery(what, pred, ms, 200);

describe.skipIf(!enabled)('the whole node: the agent image under podman beside containerd', () => {
  // cilium-cni (the bed's stand-in of CILIUM_LINE's Cilium line; install anchors the shim's entry after it), host-local
  // as its delegated IPAM; no shim yet: the agent puts it in.
  // The node as test/cri/residue.test.ts has it: its uplink eth0 in bridge azure0 (10.240.0.5/16), a VNet host
  // (10.240.0.4) routing the pod range through it, so residue for a pod's address cuts the VNet off from the pod.
  let vnet = '';
  const s = useCriBed({
    confList: (dirs) => ({ cniVersion: '0.3.1', name: dirs.network, plugins: [ciliumCni(hostLocal(dirs, RANGES))] }),
    async prepare(node, net) {
      vnet = await vnetBridge(net, node);
    },
  });
  let podman: PodmanBed;
  let image: string;
  let logDir: string;
  /** The shim's stateDir and log file, as the agent's --shim-config puts them in the conflist. */
  let nodeDir: string;
  let stateDir: string;
  const container = `ipam-shim-node-${uid(8)}`;
  const owner = `health-${uid()}`;
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const t0 = Date.now();

  const ledger = () => ledgerRecords(stateDir, s.bed.network);
  const store = () => hostLocalAllocations(s.bed.dataDir, s.bed.network);
  /** A real HTTP client (Node's fetch) in the node's network namespace, where the agent listens. */
  async function scrape(urlPath: string): Promise<{ status: number; body: string }> {
    const code = `fetch(${JSON.stringify(`http://127.0.0.1:${port}${urlPath}`)}).then(async (r) => process.stdout.write(r.status + '\\n' + (await r.text())))`;
    const r = await execa('nsenter', [`--net=/run/netns/${s.node}`, process.execPath, '-e', code], { timeout: 10_000 });
    const nl = r.stdout.indexOf('\n');
    return { status: Number(r.stdout.slice(0, nl)), body: r.stdout.slice(nl + 1) };
  }
  /** The sum of a metric's samples (every label set) matching `labels`. */
  async function metric(name: string, labels = ''): Promise<number> {
    const { body } = await scrape('/metrics');
    return body
      .split('\n')
      .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
      .filter((l) => l.includes(labels))
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  }
  const passes = () => metric('ipam_shim_agent_reconcile_passes_total');
  const agentLogs = async () => String((await podman.podman(['logs', '--tail', '40', container], { reject: false })).stdout);

  let agentMode: 'report' | 'apply' | undefined;
  /** The agent's container as the DaemonSet runs it, in gc `mode` (the ConfigMap's gc-mode). */
  async function runAgent(mode: 'report' | 'apply'): Promise<void> {
    const ds = await daemonSet();
    // What stands for each of the DaemonSet's host paths on this node; a path the DaemonSet adds fails here.
    const nodePaths: Record<string, string> = {
      '/opt/cni/bin': s.bed.binDir,
      '/etc/cni/net.d': s.bed.confDir,
      [CNI_CACHE]: CNI_CACHE,
      '/var/log/ipam-shim': logDir,
      '/run/netns': '/run/netns',
      '/var/run/azure-vnet': path.join(nodeDir, 'azure-vnet'),
    };
    const hostDir = (p: string) => {
      if (!nodePaths[p]) throw new Error(`the whole-node test has nothing standing for the DaemonSet's host path ${p}`);
      return nodePaths[p];
    };
    // Every network the container sees is given: never podman's default bridge network (it writes into the host's nft).
    const run = await podman.podman(
      [
        'run',
        '--detach',
        '--name',
        container,
        ...podmanSecurityArgs(ds),
        '--network',
        `ns:/run/netns/${s.node}`,
        ...podmanMountArgs(ds, hostDir),
        // The shim's state and log, host-local's store, the plugins the bed's bin dir links to: at their own paths.
        '--volume',
        `${nodeDir}:${nodeDir}`,
        '--volume',
        `${s.bed.dataDir}:${s.bed.dataDir}`,
        '--volume',
        `${PLUGIN_DIR}:${PLUGIN_DIR}:ro`,
        image,
        'agent',
        '--gc',
        mode,
        '--interval',
        String(INTERVAL_S),
        '--jitter',
        '0',
        '--grace-seconds',
        String(GRACE_S),
        '--listen',
        `127.0.0.1:${port}`,
        '--network',
        s.bed.network,
        '--shim-config',
        JSON.stringify({ stateDir, logFile: path.join(nodeDir, 'shim.log') }),
      ],
      { reject: false },
    );
    expect(run.exitCode, String(run.stderr)).toBe(0);
    agentMode = mode;
    // The agent holds exactly the DaemonSet's capabilities (and so every step below was proven with no more).
    const status = String((await podman.podman(['exec', container, 'cat', '/proc/1/status'])).stdout);
    expect(capabilityNames(/^CapEff:\s*(\S+)$/m.exec(status)?.[1] ?? '')).toEqual(
      [...(ds.container.securityContext?.capabilities?.add ?? [])].sort(),
    );
  }
  /** The agent running in `apply` (as the first test leaves it), started again if a test before stopped elsewhere. */
  async function ensureApplyAgent(): Promise<void> {
    const running = await podman.podman(['inspect', '--format', '{{.State.Running}}', container], { reject: false });
    if (String(running.stdout) === 'true' && agentMode === 'apply') return;
    await podman.podman(['rm', '--force', container], { reject: false });
    await runAgent('apply');
  }

  beforeAll(async () => {
    podman = await PodmanBed.create({ confList: { cniVersion: '0.4.0', plugins: [{ type: 'loopback' }] } });
    image = await buildTestImage(podman, 'whole-node test');
    logDir = await mkdtemp(path.join(os.tmpdir(), 'whole-node-log-'));
    nodeDir = await mkdtemp(path.join(os.tmpdir(), 'whole-node-'));
    await mkdir(path.join(nodeDir, 'azure-vnet'));
    stateDir = path.join(nodeDir, 'shim-state');
    await mkdir(s.bed.dataDir, { recursive: true });
    await mkdir(path.join(CNI_CACHE, 'results'), { recursive: true });
    // The node has no shim yet: the agent installs it.
    await rm(path.join(s.bed.binDir, 'ipam-shim'), { force: true });
    s.net.defer(() => execa('ip', ['netns', 'del', `ipam-shim-agent-${owner}`], { reject: false }));
  }, 600_000);

  // The bed wipes host-local's store after a failed test; the ledger (this test's stateDir, not the bed's) goes with
  // it, or the next test's pods are refused the addresses a failed test's records still hold.
  afterEach(async (ctx) => {
    if (ctx.task.result?.state !== 'fail' || !stateDir) return;
    for (const entry of await readdir(stateDir).catch(() => [] as string[])) await rm(path.join(stateDir, entry), { recursive: true, force: true });
  });

  afterAll(async () => {
    // Registered after the CRI bed's hooks, so it runs first: the container (and podman's store) go before containerd.
    await podman?.cleanup();
    for (const d of [logDir, nodeDir]) if (d) await rm(d, { recursive: true, force: true });
  });

  it('installs the shim; pods go through it; a leaked pod is reported (report) or released within two passes (apply), live pods and the agent IP never; /metrics counts it; residue removed within one pass; SIGKILL mid-pass loses nothing', async () => {
    const reloads = await s.bed.reloadCount();
    await runAgent('report');

    // The agent installs the executable and the chained entry; containerd reloads the conflist it rewrote.
    const conflist = s.bed.confListPath;
    const types = async () => (JSON.parse(await readFile(conflist, 'utf8')) as { plugins: Array<{ type: string }> }).plugins.map((p) => p.type);
    await waitFor('the shim in the conflist', async () => (await types()).includes('ipam-shim'));
    await waitFor(
      'the executable in the bin dir',
      async () => (await sha(path.join(s.bed.binDir, 'ipam-shim'))) === (await sha(path.join(ROOT, 'dist/ipam-shim'))),
    );
    expect(await types()).toEqual(['cilium-cni', 'ipam-shim']);
    await waitFor('containerd to reload the conflist', async () => (await s.bed.reloadCount()) > reloads);
    await waitFor('/healthz', async () => (await scrape('/healthz')).status === 200);

    // cilium-agent's own IP, allocated in the agent's container as `kubectl exec` would.
    const agentIp = await podman.podman(
      ['exec', container, ENTRYPOINT, 'agent-ip', 'allocate', '--owner', owner, '--network', s.bed.network, '--json'],
      { reject: false },
    );
    expect(agentIp.exitCode, `${agentIp.stdout}\n${agentIp.stderr}`).toBe(0);
    const agentIps: string[] = JSON.parse(String(agentIp.stdout)).ips;
    expect(agentIps).toHaveLength(1);
    const agentRecord = `cilium-agent-${owner}:eth0.json`;

    // A pod through CRI goes through the shim the agent chained: its ledger record appears.
    const leaked = await s.bed.runPod('leaked');
    expect(await ledger()).toEqual([agentRecord, `${leaked.id}:eth0.json`].sort());

    // The node loses its runtime with `leaked` running: no DEL ever comes for it. New pods start afterwards.
    await s.bed.crashAndWipe();
    const live = [await s.bed.runPod('live-1'), await s.bed.runPod('live-2')];
    const liveRecords = live.map((p) => `${p.id}:eth0.json`);
    const podIps = live.flatMap((p) => p.ips);

    // report (the agent's own default; the DaemonSet's is confirmed): the leak is found and counted within two passes, not released.
    const reported = await passes();
    await waitFor(
      'the agent to report the leaked pod',
      async () => (await metric('ipam_shim_agent_gc_leaked', `mode="report"`)) === 1,
      (3 * INTERVAL_S + GRACE_S) * 1000 + 10_000,
    );
    expect((await passes()) - reported).toBeLessThanOrEqual(2);
    await waitFor('one more pass', async () => (await passes()) >= reported + 3, 5 * INTERVAL_S * 1000);
    expect(await ledger()).toEqual([agentRecord, `${leaked.id}:eth0.json`, ...liveRecords].sort());
    expect(await store()).toEqual([...agentIps, ...leaked.ips, ...podIps].sort());
    expect(await metric('ipam_shim_agent_gc_released_total')).toBe(0);

    // The operator opts in (ConfigMap gc-mode: apply; the DaemonSet rolls): released within two passes.
    expect((await podman.podman(['rm', '--force', '--time', '10', container], { reject: false })).exitCode).toBe(0);
    const t1 = Date.now();
    await runAgent('apply');
    await waitFor('/healthz of the apply agent', async () => (await scrape('/healthz')).status === 200);
    await waitFor(
      'the agent to release the leaked pod',
      async () => !(await ledger()).includes(`${leaked.id}:eth0.json`),
      (3 * INTERVAL_S + GRACE_S) * 1000 + 10_000,
    ).catch(async (e) => {
      throw new Error(`${(e as Error).message}\n${await agentLogs()}`);
    });
    const after = await passes();
    console.log(`whole-node test: leak released ${Date.now() - t1} ms after the apply agent started, after ${after} pass(es)`);
    expect(after).toBeLessThanOrEqual(2);
    expect(await store()).toEqual([...agentIps, ...podIps].sort());
    expect(await ledger()).toEqual([agentRecord, ...liveRecords].sort());
    expect(await metric('ipam_shim_agent_gc_released_total', `network="${s.bed.network}"`)).toBe(1);

    // Two more passes: nothing else goes (live pods, the agent IP), and the live pods still answer ping.
    const settled = await passes();
    await waitFor('two more passes', async () => (await passes()) >= settled + 2, 5 * INTERVAL_S * 1000);
    expect(await ledger()).toEqual([agentRecord, ...liveRecords].sort());
    expect(await store()).toEqual([...agentIps, ...live.flatMap((p) => p.ips)].sort());
    expect(await metric('ipam_shim_agent_gc_released_total', `network="${s.bed.network}"`)).toBe(1);
    for (const p of live) await execa('nsenter', [`--net=/run/netns/${s.node}`, 'ping', '-c', '1', '-W', '2', p.ips[0]!]);
    const health = await scrape('/healthz');
    expect(health.status).toBe(200);

    // azure-vnet re-adds its rules for a live pod's address (and a decoy's): gone within one pass, the decoy's
    // untouched, and the VNet host reaches the pod again.
    const target = live[0]!.ips[0]!;
    for (const rule of [...podRules(target, DEAD_MAC), ...podRules(DECOY, '0:d:3a:30:47:61')])
      await inNs(s.node, 'ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...rule]);
    const planted = await passes();
    const ipDst = (ip: string) => new RegExp(`ip-dst ${ip.replaceAll('.', '\\.')}(/32)? `, 'g');
    const nat = async () => (await inNs(s.node, 'ebtables', ['-t', 'nat', '-L'])).stdout;
    await waitFor('the agent to remove the residue', async () => !ipDst(target).test(await nat()), 3 * INTERVAL_S * 1000 + 10_000);
    expect((await passes()) - planted).toBeLessThanOrEqual(1);
    expect((await nat()).match(ipDst(DECOY))).toHaveLength(2);
    expect(await metric('ipam_shim_agent_residue_removed_total', `network="${s.bed.network}"`)).toBeGreaterThanOrEqual(2);
    expect((await inNs(vnet, 'ping', ['-c', '3', '-i', '0.2', '-W', '1', '-q', target], { reject: false })).exitCode).toBe(0);

    // SIGKILL mid-pass (SIGHUP starts one at once), then the container started again as kubelet would: nothing lost
    // (binary, entry, live pods' and the agent's records and addresses), nothing released again.
    const installed = await sha(path.join(s.bed.binDir, 'ipam-shim'));
    for (const signal of ['HUP', 'KILL']) expect((await podman.podman(['kill', '--signal', signal, container], { reject: false })).exitCode).toBe(0);
    await waitFor(
      'the container to stop',
      async () => String((await podman.podman(['inspect', '--format', '{{.State.Running}}', container])).stdout) === 'false',
    );
    expect((await podman.podman(['start', container], { reject: false })).exitCode).toBe(0);
    await waitFor('/healthz after the restart', async () => (await scrape('/healthz')).status === 200);
    await waitFor('two passes after the restart', async () => (await passes()) >= 2, 5 * INTERVAL_S * 1000);
    expect(await ledger()).toEqual([agentRecord, ...liveRecords].sort());
    expect(await store()).toEqual([...agentIps, ...live.flatMap((p) => p.ips)].sort());
    expect(await metric('ipam_shim_agent_gc_released_total', `network="${s.bed.network}"`)).toBe(0);
    expect(await types()).toEqual(['cilium-cni', 'ipam-shim']);
    expect(await sha(path.join(s.bed.binDir, 'ipam-shim'))).toBe(installed);
    for (const p of live) await execa('nsenter', [`--net=/run/netns/${s.node}`, 'ping', '-c', '1', '-W', '2', p.ips[0]!]);
    console.log(`whole-node test: ${Date.now() - t0} ms since the suite started (image build included)`);
  });

  it('a flushed probe table is restored within one pass and the LB probe to a dual-stack pod is answered', async () => {
    const t2 = Date.now();
    // The agent as the test above leaves it (running, shim chained); started again if that test stopped early.
    await ensureApplyAgent();
    const conflist = async () => JSON.parse(await readFile(s.bed.confListPath, 'utf8')) as { plugins: Array<Record<string, unknown>> };
    await waitFor('the shim in the conflist', async () => (await conflist()).plugins.some((p) => p.type === 'ipam-shim'));

    // Azure's LB beside the node (test/support/net/probe-topology.ts): lb (fe80::1234:5678:9abc only) ── node's `lb6`,
    // the node's default IPv6 route via it (the uplink the shim discovers).
    const lb = await s.net.netns('lb');
    const [inLb, inNode] = [runInNetns(lb), runInNetns(s.node)];
    await s.net.veth(lb, 'eth0', s.node, 'lb6');
    await inLb('ip', ['link', 'set', 'eth0', 'addrgenmode', 'none']);
    await inLb('ip', ['-6', 'addr', 'flush', 'dev', 'eth0']);
    await inLb('ip', ['-6', 'addr', 'add', `${PROBE_SOURCE}/64`, 'dev', 'eth0', 'nodad']);
    await inLb('ip', ['-6', 'route', 'add', V6_RANGE, 'via', 'fe80::1', 'dev', 'eth0']);
    await inNode('ip', ['-6', 'addr', 'add', 'fe80::1/64', 'dev', 'lb6', 'nodad']);
    await inNode('sysctl', ['-qw', 'net.ipv6.conf.all.forwarding=1']);
    await inNode('ip', ['-6', 'route', 'add', 'default', 'via', PROBE_SOURCE, 'dev', 'lb6']);

    // Dual-stack: an IPv6 range for host-local, in cilium-cni's ipam and in the shim's delegate the agent derived.
    const dual = hostLocal(s.bed, [...RANGES, [{ subnet: V6_RANGE }]]);
    const list = await conflist();
    await s.bed.setConfList({
      ...list,
      plugins: list.plugins.map((p) => (p.type === 'ipam-shim' ? { ...p, delegate: dual } : { ...p, ipam: dual })),
    });
    const pod = await s.bed.runPod('dual');
    const v6 = pod.ips.find((ip) => ip.includes(':'));
    expect(v6, pod.ips.join(' ')).toBeDefined();
    expect(await ledger()).toContain(`${pod.id}:eth0.json`);

    // The table ADD put in, stateless (no counters): what the agent must put back.
    const table = async () => (await inNode('nft', ['-s', 'list', 'table', 'ip6', PROBE_TABLE], { check: false })).stdout;
    const installed = await table();
    expect(installed).toContain(PROBE_SOURCE);

    // Something flushes it (a node's nft reload, an operator): gone; the next agent pass puts it back.
    const restores = await metric('ipam_shim_agent_probe_restores_total');
    const flushedAt = await passes();
    await inNode('nft', ['flush', 'table', 'ip6', PROBE_TABLE]);
    expect(await table()).not.toContain(PROBE_SOURCE);
    const t3 = Date.now();
    // The passes counted when the restore is first seen, not after: at a 2 s interval a loaded machine could finish
    // one more pass between that look and a later one (CI at load ~20 counted 3).
    let passesAtRestore = Number.POSITIVE_INFINITY;
    await waitFor(
      'the agent to restore the probe table',
      async () => {
        if ((await table()) !== installed) return false;
        passesAtRestore = await passes();
        return true;
      },
      INTERVAL_S * 1000 + 5_000,
    ).catch(async (e) => {
      throw new Error(`${(e as Error).message}\n${await table()}\n${await agentLogs()}`);
    });
    console.log(`whole-node test: probe table restored ${Date.now() - t3} ms after the flush`);
    // The pass in flight at the flush (its probe step may have run before it), then one.
    expect(passesAtRestore - flushedAt).toBeLessThanOrEqual(2);
    expect(await metric('ipam_shim_agent_probe_restores_total')).toBeGreaterThan(restores);

    // A real probe from the LB's source reaches the pod (rewritten) and is answered (DAD may still be running).
    const podInput = await watchPodInput(runInNetns(pod.netnsPath.split('/').pop()!));
    await waitFor('the probe to be answered', async () => (await ping(inLb, v6!)).exitCode === 0, 15_000);
    expect((await podInput()).fromGlobal).toBeGreaterThan(0);
    await s.bed.removePod(pod.id);
    console.log(`whole-node test: probe test took ${Date.now() - t2} ms`);
  });

  it("GC enters pods' namespaces: a pod missing from the runtime cache whose namespace no longer holds its address is released, one whose namespace holds it is kept", async () => {
    const t4 = Date.now();
    await ensureApplyAgent();
    await waitFor('/healthz', async () => (await scrape('/healthz')).status === 200);
    // Three pods; the runtime's cache loses two of them (the third keeps the cache in sight: an empty cache makes GC
    // refuse). One of the two loses its address inside its namespace, which stays.
    const [vacated, kept, anchor] = [await s.bed.runPod('vacated'), await s.bed.runPod('cacheless'), await s.bed.runPod('anchor')];
    expect(await ledger()).toEqual(expect.arrayContaining([vacated, kept, anchor].map((p) => `${p.id}:eth0.json`)));
    for (const p of [vacated, kept]) await rm(path.join(CNI_CACHE, 'results', `${s.bed.network}-${p.id}-eth0`));
    await execa('nsenter', [`--net=${vacated.netnsPath}`, 'ip', 'addr', 'flush', 'dev', 'eth0']);
    // Only the probe tells the two apart: both namespaces exist, neither is in the cache.
    const start = await passes();
    await waitFor(
      'the agent to release the vacated pod',
      async () => !(await ledger()).includes(`${vacated.id}:eth0.json`),
      (3 * INTERVAL_S + GRACE_S) * 1000 + 10_000,
    ).catch(async (e) => {
      throw new Error(`${(e as Error).message}\n${await agentLogs()}`);
    });
    expect((await passes()) - start).toBeLessThanOrEqual(3);
    await waitFor('two more passes', async () => (await passes()) >= start + 4, 6 * INTERVAL_S * 1000);
    expect(await ledger()).toEqual(expect.arrayContaining([kept, anchor].map((p) => `${p.id}:eth0.json`)));
    expect(await store()).toEqual(expect.arrayContaining([...kept.ips, ...anchor.ips]));
    for (const ip of vacated.ips) expect(await store()).not.toContain(ip);
    console.log(`whole-node test: netns probe test took ${Date.now() - t4} ms`);
  });
});
