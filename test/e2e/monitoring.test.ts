// The shipped alerts and dashboard against real parts: Debian's Prometheus scraping the BUILT agent's /metrics
// (`dist/ipam-shim agent`, job "ipam-shim" as deploy/monitoring/podmonitor.yaml names it) and Debian's
// node-exporter serving the plugin's metrics textfile through its textfile collector (job "node-exporter", every
// other collector off), after real CNI calls through the plugin in a node netns (test/e2e/agent.test.ts's bed:
// the cilium-cni stand-in (1.17, test/support/shim/cilium.ts) + host-local, the shim chained, the project's
// libcni-like runner). One Prometheus scrapes both places here so
// each plugin alert is seen to work on either (on a cluster only one is scraped: docs/operations.md#monitoring).
// Everything runs in the node netns on loopback, Prometheus with a scratch config and TSDB, 1 s scrapes.
//
// Each alert's expression is evaluated through /api/v1/query before its condition exists (no result) and after
// (a result); `for:` durations are not waited out (the expression is what is tested), and Prometheus, given the
// PrometheusRule's groups as its rule file, is seen to hold each such alert pending or firing. Windows are the
// shipped ones (the test's data all lies inside them); one threshold cannot be reached in a test and is lowered
// (IpamShimAgentStalled: > 300 s evaluated as > 2 s). Then every dashboard query returns rows, and the agent-down
// and agent-absent alerts fire once the agent is stopped and its scrape job removed.
import { execa, type ResultPromise } from 'execa';
import { mkdir, readdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { runInNetns, type Run } from '../../src/effects/exec.js';
import { ErrorCode } from '../../src/cni/errors.js';
import { FIXTURE_BIN, invoke, PLUGIN_DIR, ROOT, scratch, SHIM, shimBinDir } from '../support/shim/cni.js';
import { rootOrSkip, TestNet, uid } from '../support/net/netns.js';
import { shimConf } from '../support/shim/conf.js';
import { podRules, vnetBridge } from '../support/net/azure-vnet.js';
import { CniRunner, PluginError } from '../support/runtimes/runner.js';
import { waitFor as waitForEvery } from '../support/wait.js';
import { agentArgs, isPass, jsonLines } from '../support/shim/agent.js';
import { CiliumAgentStandIn } from '../support/doubles/cilium-agent.js';
import { ciliumCni, ciliumCniDir } from '../support/shim/cilium.js';

/** Prometheus scrapes every second: poll it at 250 ms. */
const waitFor = (what: string, pred: () => Promise<boolean> | boolean, ms = 30_000) => waitForEvery(what, pred, ms, 250);

const AGENT = join(ROOT, 'dist/ipam-shim');
const PROMETHEUS = 'prometheus';
const NODE_EXPORTER = 'prometheus-node-exporter';
const DEAD_MAC = '0:d:3a:30:47:42';
/** The job the PodMonitor's jobLabel gives the agents' series (checked by test/unit/deploy-monitoring.test.ts). */
const AGENT_JOB = 'ipam-shim';
/** The firewall incident (issue 37 part 7): a reserved firewall subnet, and the route that captures it. */
const FIREWALL = '10.224.0.0/24';
const INCIDENT = { reserved: FIREWALL, route: '10.224.0.0/16 via 10.240.0.9 dev azure0', gateway: '10.240.0.9' };
const incidentSeries = `ipam_shim_agent_reserved_routes{job="${AGENT_JOB}",reserved="${INCIDENT.reserved}",route="${INCIDENT.route}",gateway="${INCIDENT.gateway}"}`;
/** The node name the PodMonitor's relabeling puts on the agent's series (`node`). */
const NODE_NAME = 'aks-nodepool1-31877520-vmss000000';
const AKS_CILIUM = { cniVersion: '0.3.1', name: 'cilium', plugins: [{ type: 'cilium-cni', ipam: { type: 'azure-ipam' } }] };

type Obj = Record<string, any>;

const enabled = rootOrSkip();
const found = async (bin: string) => (await execa(bin, ['--version'], { reject: false, all: true })).exitCode === 0;
const missing = enabled ? [...(await Promise.all([PROMETHEUS, NODE_EXPORTER].map(async (b) => ((await found(b)) ? [] : [b])))).flat()] : [];
if (missing.length && process.env.CI === 'true') throw new Error(`CI must have ${missing.join(', ')} (scripts/install-deps.sh installs them)`);
if (missing.length) console.warn(`skipping monitoring e2e: ${missing.join(', ')} not installed (scripts/install-deps.sh)`);

/** Set to a directory to also render the main panels' queries from this run's data to a PNG there (Debian's chromium). */
const PNG_DIR = process.env.IPAM_SHIM_MONITORING_PNG;

const port = () => 20_000 + Math.floor(Math.random() * 20_000);

interface Proc {
  name: string;
  proc: ResultPromise;
  out: () => string;
}

interface Alert {
  alert: string;
  expr: string;
  for?: string;
}

/** The shipped rules and dashboard, read once: the PrometheusRule's spec (its groups) and the dashboard's model. */
const RULE_SPEC = (parse(await readFile(resolve(ROOT, 'deploy/monitoring/prometheusrule.yaml'), 'utf8')) as Obj).spec as Obj;
const DASHBOARD = JSON.parse(await readFile(resolve(ROOT, 'deploy/monitoring/grafana-dashboard.json'), 'utf8')) as Obj;
const ALERTS: Alert[] = (RULE_SPEC.groups as Obj[]).flatMap((g) => g.rules as Alert[]);

/** The expression as evaluated after the condition was made to hold: the one threshold no test can wait for. */
const AFTER_OVERRIDES: Record<string, (expr: string) => string> = {
  IpamShimAgentStalled: (e) => e.replace('> 300', '> 2'),
  // A healthy agent holds ~25 descriptors: the expression is seen to read the agent's series (and not
  // node-exporter's own process_open_fds) with the threshold at 0; its firing is promtool's case.
  IpamShimAgentFdsHigh: (e) => e.replace('> 200', '> 0'),
  // Unverified needs a delegate whose CHECK proves nothing and whose repeated ADD fails (host-local's CHECK proves):
  // here only the series' presence (0) is evaluated; its firing is promtool's case (alerts.test.yaml).
  IpamShimAgentIpUnverified: (e) => e.replace('> 0', '>= 0'),
};
/** Alerts only a stopped agent (or a removed job) makes true: evaluated at the end. */
const AT_THE_END = new Set(['IpamShimAgentDown', 'IpamShimAgentAbsent']);

describe.skipIf(!enabled || missing.length > 0)('the shipped alerts and dashboard in a real Prometheus (agent + node-exporter)', () => {
  const net = new TestNet();
  const procs: Proc[] = [];
  let s: Awaited<ReturnType<typeof scratch>>;
  let node = '';
  let r: Run;
  let network = '';
  let confDir = '';
  let agentConflist = '';
  let confList: Obj;
  let runner: CniRunner;
  let pluginDirs: string[] = [];
  /** cilium-agent's API for the cilium-cni stand-in. */
  let cilium: CiliumAgentStandIn;
  let cniPath = '';
  let textfileDir = '';
  let metricsFile = '';
  let promPort = 0;
  let nePort = 0;
  let agentPort = 0;
  let promDir = '';
  let agent: Proc;
  const owners: string[] = [];
  /** Per alert: the series it reads, whether it returned nothing before its condition, whether it fired after. */
  const table = new Map<string, { reads: string; quietBefore?: boolean; firedAfter?: boolean; jobs?: string[]; note?: string }>();

  function start(name: string, file: string, args: string[], env: Record<string, string> = {}): Proc {
    const proc = execa('ip', ['netns', 'exec', node, file, ...args], { reject: false, env, buffer: false });
    let text = '';
    proc.stdout!.on('data', (d: Buffer) => (text += d.toString()));
    proc.stderr!.on('data', (d: Buffer) => (text += d.toString()));
    const p = { name, proc, out: () => text };
    procs.push(p);
    return p;
  }
  const passes = (a: Proc) => jsonLines(a.out()).filter(isPass);
  /**
   * The first pass logged after a SIGHUP that satisfies `until`. A pass may already be in flight when the signal comes
   * (the agent retries a pass that did not complete after 250 ms), and it is logged first: `until` skips it.
   */
  async function onePass(a: Proc, until: (p: Obj) => boolean = () => true): Promise<Obj> {
    const before = passes(a).length;
    a.proc.kill('SIGHUP');
    await waitFor('a pass after SIGHUP', () => passes(a).slice(before).some(until));
    return passes(a).slice(before).find(until)!;
  }

  /** GETs on the node's loopback with Node's fetch run inside the netns: one process for the whole batch. */
  async function get(paths: Array<string | { path: string; method: 'POST' }>): Promise<Obj[]> {
    const script = `let s = ''; for await (const c of process.stdin) s += c;
      const { port, paths } = JSON.parse(s); const out = [];
      for (const p of paths) { const r = await fetch('http://127.0.0.1:' + port + (p.path ?? p), { method: p.method ?? 'GET' });
        const t = await r.text(); try { out.push(JSON.parse(t)); } catch { out.push({ status: r.status, text: t }); } }
      process.stdout.write(JSON.stringify(out));`;
    const res = await execa('ip', ['netns', 'exec', node, process.execPath, '--input-type=module', '-e', script], {
      input: JSON.stringify({ port: promPort, paths }),
    });
    return JSON.parse(res.stdout) as Obj[];
  }
  const jobOf = (instance: string) => (instance.endsWith(`:${agentPort}`) ? AGENT_JOB : instance.endsWith(`:${nePort}`) ? 'node-exporter' : instance);
  const q = (expr: string) => `/api/v1/query?query=${encodeURIComponent(expr)}`;
  /** Instant queries at "now": each one's result vector. */
  async function query(exprs: string[]): Promise<Obj[][]> {
    const out = await get(exprs.map(q));
    return out.map((o, i) => {
      if (o.status !== 'success') throw new Error(`${exprs[i]}: ${JSON.stringify(o)}`);
      return o.data.result as Obj[];
    });
  }
  const one = async (expr: string) => (await query([expr]))[0]!;
  const value = async (expr: string) => Number((await one(expr))[0]?.value?.[1] ?? Number.NaN);

  /** Prometheus' config: the agent's job with its target, or (`withAgent` false) with none, as when the DaemonSet's pods are gone. */
  async function prometheusConfig(withAgent: boolean): Promise<void> {
    // What the PodMonitor's target carries: the pod's namespace and name, and `node` (its relabeling of the pod's
    // node name): the alerts' descriptions and the dashboard name the node by it.
    const agentTargets = withAgent
      ? [{ targets: [`127.0.0.1:${agentPort}`], labels: { namespace: 'kube-system', pod: 'ipam-shim-e2e', node: NODE_NAME } }]
      : [];
    const config = {
      global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
      rule_files: [join(promDir, 'rules.yaml')],
      scrape_configs: [
        { job_name: AGENT_JOB, static_configs: agentTargets },
        { job_name: 'node-exporter', static_configs: [{ targets: [`127.0.0.1:${nePort}`] }] },
      ],
    };
    await writeFile(join(promDir, 'prometheus.yml'), stringify(config));
  }

  beforeAll(async () => {
    s = await scratch();
    net.defer(() => s.cleanup());
    // Every process this suite starts is killed (SIGKILL, awaited) whatever happened, before the dirs go.
    net.defer(async () => {
      for (const p of procs) p.proc.kill('SIGKILL');
      await Promise.allSettled(procs.map((p) => p.proc));
      for (const owner of owners) await execa('ip', ['netns', 'del', `ipam-shim-agent-${owner}`], { reject: false });
    });
    node = await net.netns('node');
    await vnetBridge(net, node);
    r = runInNetns(node);
    network = `mon${uid()}`;
    textfileDir = join(s.dir, 'textfile');
    metricsFile = join(textfileDir, 'ipam-shim.prom');
    const hostLocal = {
      type: 'host-local',
      dataDir: s.dataDir,
      ranges: [[{ subnet: '10.240.0.0/16', rangeStart: '10.240.0.32', rangeEnd: '10.240.0.63' }], [{ subnet: 'fd00:10:240::/64' }]],
    };
    confList = {
      cniVersion: '1.0.0',
      name: network,
      plugins: [
        ciliumCni(hostLocal),
        { type: 'ipam-shim', stateDir: s.stateDir, logFile: s.logFile, metricsFile, uplink: 'eth0', delegate: hostLocal },
      ],
    };
    confDir = join(s.dir, 'net.d');
    await mkdir(confDir);
    await writeFile(join(confDir, '05-cilium.conflist'), JSON.stringify(AKS_CILIUM, null, 2));
    agentConflist = join(confDir, '10-agent.conflist');
    await writeFile(agentConflist, JSON.stringify(confList, null, 2));
    const pluginBin = await shimBinDir(s.dir);
    cniPath = [ciliumCniDir('1.17'), PLUGIN_DIR, FIXTURE_BIN].join(':');
    pluginDirs = [ciliumCniDir('1.17'), pluginBin, PLUGIN_DIR, FIXTURE_BIN];
    cilium = await CiliumAgentStandIn.start({ routerIPv6: 'fd00:23::1' }); // dual-stack pods, as ptp gave them
    net.defer(() => cilium.stop());
    runner = new CniRunner({ confList, pluginDirs, cacheDir: join(s.dir, 'cache'), netns: node, env: cilium.env() });
    promDir = join(s.dir, 'prometheus');
    await mkdir(join(promDir, 'data'), { recursive: true });
    await writeFile(join(promDir, 'rules.yaml'), stringify(RULE_SPEC));
    [promPort, nePort, agentPort] = [port(), port(), port()];
    await prometheusConfig(true);
  });

  afterAll(async () => {
    await net.cleanup();
    if (table.size) {
      console.log('alert | reads | quiet before | fired after | jobs | note');
      for (const [a, t] of table)
        console.log(`${a} | ${t.reads} | ${t.quietBefore} | ${t.firedAfter} | ${t.jobs?.join(',') ?? ''} | ${t.note ?? ''}`);
    }
  });

  async function pod(id: string, rt = runner): Promise<{ ns: string; ip: string }> {
    const ns = await net.netns('pod');
    const result: any = await rt.add(id, `/run/netns/${ns}`);
    const ips = (result.ips as Array<{ address: string }>).map((i) => i.address.split('/')[0]!);
    return { ns, ip: ips.find((i) => !i.includes(':'))! };
  }
  async function agentIp(action: 'allocate' | 'release', owner: string): Promise<void> {
    if (!owners.includes(owner)) owners.push(owner);
    await execa('ip', [
      'netns',
      'exec',
      node,
      SHIM,
      'agent-ip',
      action,
      '--owner',
      owner,
      '--conflist',
      agentConflist,
      '--cni-path',
      cniPath,
      '--json',
    ]);
  }
  /** The address host-local hands out next (its last reservation + 1, within 10.240.0.32–63). */
  async function nextV4(): Promise<string> {
    const last = (await readFile(join(s.dataDir, network, 'last_reserved_ip.0'), 'utf8')).trim();
    const n = Number(last.split('.')[3]);
    return `10.240.0.${n >= 63 ? 32 : n + 1}`;
  }

  /**
   * The main panels' queries on Prometheus' own graph page, rendered by headless chromium in the node netns (the
   * docs' picture: the test's real data, not Grafana's rendering). Opt-in: IPAM_SHIM_MONITORING_PNG=<dir>.
   */
  async function screenshot(targets: Array<{ panel: string; expr: string }>, dir: string): Promise<void> {
    const main = ['Calls by verb', 'Failed calls by code', 'Reserved refusals', 'Residue removed', 'Leaked addresses', 'Agent passes and errors'];
    const picked = main.map((title) => targets.find((t) => t.panel === title)!);
    const params = picked.flatMap((t, i) => {
      const expr = t.expr.replaceAll('$__rate_interval', '30s').replaceAll('$job', AGENT_JOB).replaceAll('$node', '.*');
      return [`g${i}.expr=${encodeURIComponent(expr)}`, `g${i}.tab=0`, `g${i}.range_input=1m`];
    });
    const out = resolve(dir, 'monitoring-e2e.png');
    await execa(
      'ip',
      [
        'netns',
        'exec',
        node,
        'chromium',
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        `--user-data-dir=${join(s.dir, 'chromium')}`,
        '--window-size=1200,4450',
        '--virtual-time-budget=10000',
        `--screenshot=${out}`,
        `http://127.0.0.1:${promPort}/classic/graph?${params.join('&')}`,
      ],
      { timeout: 60_000 },
    );
    console.log(`monitoring e2e: ${out} (${picked.map((t) => t.panel).join(', ')})`);
  }

  it('every alert returns nothing on a healthy node, and fires once its condition holds: on the agent and on node-exporter', async () => {
    const t0 = Date.now();
    // A node as the DaemonSet leaves it: an agent IP, a live pod, the shim chained, the agent running.
    await agentIp('allocate', 'health');
    const alive = await pod('pod-alive');
    // A second network, the shim in a main plugin's IPAM slot over a delegate that can be made slow: its first ADD
    // is quick (a histogram's series are born at a verb's first call, so the slow one must not be that call).
    const slowConf = shimConf({
      name: `${network}-slow`,
      dirs: s,
      probeRewrite: false,
      delegate: { type: 'slow-ipam', dataDir: s.dataDir, ranges: [[{ subnet: '10.241.0.0/24' }]] },
      keys: { metricsFile },
    });
    const slowAdd = async (containerID: string, env: Record<string, string> = {}) =>
      invoke(slowConf, { command: 'ADD', containerID, netns: `/run/netns/${await net.netns('slow')}`, ifname: 'eth0', inNetns: node, env });
    expect((await slowAdd('pod-quick')).exitCode).toBe(0);
    start('node-exporter', NODE_EXPORTER, [
      '--collector.disable-defaults',
      '--collector.textfile',
      `--collector.textfile.directory=${textfileDir}`,
      `--web.listen-address=127.0.0.1:${nePort}`,
    ]);
    const dirs = { network, confDir, cniPath, cacheDir: join(s.dir, 'cache'), binDir: join(s.dir, 'opt-cni-bin') };
    agent = start('agent', AGENT, [...agentArgs(AGENT, dirs, { graceSeconds: 0 }), '--interval', '3600', '--listen', `127.0.0.1:${agentPort}`]);
    start('prometheus', PROMETHEUS, [
      `--config.file=${join(promDir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(promDir, 'data')}`,
      `--web.listen-address=127.0.0.1:${promPort}`,
      '--web.enable-lifecycle',
      '--log.level=warn',
    ]);
    await waitFor('the first pass', () => passes(agent).length >= 1);
    // Both places scraped at least twice after the first call (counters need a sample before their increase), the
    // entry chained (the agent installs it into 05-cilium.conflist).
    await waitFor(
      'two scrapes of both places',
      async () => {
        const [a, b, c] = await query([
          `count_over_time(ipam_shim_reserved_refusals_total{job="${AGENT_JOB}"}[1m])`,
          'count_over_time(ipam_shim_reserved_refusals_total{job="node-exporter"}[1m])',
          `ipam_shim_agent_conflist_entry_in_use{job="${AGENT_JOB}"} == 1`,
        ]);
        return Number(a![0]?.value[1]) >= 2 && Number(b![0]?.value[1]) >= 2 && c!.length === 1;
      },
      45_000,
    );
    // cilium-agent's address (both families) is in the ledger: the gauge IpamShimAgentIpsLost watches is above 0.
    expect(await value(`ipam_shim_agent_ips{job="${AGENT_JOB}",network="${network}"}`)).toBe(2);

    const alerts = ALERTS;
    for (const a of alerts) table.set(a.alert, { reads: [...new Set(a.expr.match(/\b(ipam_shim_[a-z_]+|up)\b/g))].join(', ') });
    const before = await query(alerts.map((a) => a.expr));
    alerts.forEach((a, i) => {
      table.get(a.alert)!.quietBefore = before[i]!.length === 0;
    });
    expect(
      alerts.filter((_, i) => before[i]!.length > 0).map((a, i) => `${a.alert}: ${JSON.stringify(before[i])}`),
      'alerts with a result on the healthy node',
    ).toEqual([]);

    // --- the problems, each made for real ---
    // host-local forgets cilium-agent's address (its reservations removed): the agent's next pass finds it (its
    // CHECK fails) and re-allocates (IpamShimAgentIpReallocated; the counter exists at 0 from the first pass).
    for (const f of await readdir(join(s.dataDir, network))) {
      if ((await readFile(join(s.dataDir, network, f), 'utf8').catch(() => '')).startsWith('cilium-agent-health'))
        await unlink(join(s.dataDir, network, f));
    }
    expect(await onePass(agent)).toMatchObject({ agentIpsReallocated: 1 });
    // A slow call (> 5 s): the second ADD on this network, through a delegate that sleeps 5.2 s after host-local.
    const slow = slowAdd('pod-slow', { SLOW_IPAM_AFTER: '5.2' });
    net.defer(() => slow.catch(() => undefined)); // a failure before it is awaited still waits for it
    // cilium-agent's address released: the next call's gauge says 0 where it said 1.
    await agentIp('release', 'health');
    // A refusal (code 100): the pool now lies in reservedCIDRs. The agent reads the same list: the live pod is
    // then in a reserved subnet too.
    // The firewall subnet 10.224.0.0/24 is reserved too: the firewall incident is replayed on it below.
    const reserved = structuredClone(confList);
    reserved.plugins[1].reservedCIDRs = ['10.240.0.32/27', FIREWALL];
    await writeFile(agentConflist, JSON.stringify(reserved, null, 2));
    const refusing = new CniRunner({ confList: reserved, pluginDirs, cacheDir: join(s.dir, 'cache'), netns: node, env: cilium.env() });
    const refusedNs = await net.netns('pod');
    const refusal = await refusing.add('pod-refused', `/run/netns/${refusedNs}`).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(PluginError);
    expect((refusal as PluginError).code).toBe(ErrorCode.ReservedAddress);
    await refusing.del('pod-refused', `/run/netns/${refusedNs}`);
    // Another failure, twice: a chained ADD without prevResult (code 7). Every error series exists at 0 from the
    // first call (issue 45), so each failure is an increase Prometheus can see; one verb's series, in both places.
    for (const [i, cid] of ['no-prev-1', 'no-prev-2'].entries()) {
      const out = await invoke(
        { cniVersion: '1.0.0', name: network, ...confList.plugins[1] },
        { command: 'ADD', containerID: cid, netns: `/run/netns/${refusedNs}`, ifname: 'eth0', inNetns: node, path: [PLUGIN_DIR] },
      );
      expect(out.json?.code, out.stdout).toBe(ErrorCode.InvalidNetworkConfig);
      // Both places scraped this failure before the next one: a sample between the two.
      await waitFor(`failure ${i + 1} scraped in both places`, async () => {
        const seen = await one(`ipam_shim_errors_total{network="${network}",verb="ADD",code="7"}`);
        return seen.length === 2 && seen.every((x) => Number(x.value[1]) === i + 1);
      });
    }
    // azure-vnet residue for the next pod's address: that ADD removes it (2 ebtables rules, 1 neighbour).
    const next = await nextV4();
    for (const rule of podRules(next, DEAD_MAC)) await r('ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...rule]);
    await r('ip', ['neigh', 'add', next, 'lladdr', DEAD_MAC, 'dev', 'azure0', 'nud', 'permanent']);
    const cleaned = await pod('pod-residue');
    expect(cleaned.ip).toBe(next);
    // A leaked pod: its cache entry and netns gone, no DEL.
    const leaked = await pod('pod-leaked');
    await unlink(runner.cacheFilePath('pod-leaked'));
    await execa('ip', ['netns', 'del', leaked.ns]);
    // The probe table deleted (after the last ADD: each dual-stack ADD puts it back), residue re-added for the live
    // pod: the agent's pass restores the one and removes the other.
    await r('nft', ['delete', 'table', 'ip6', 'azureSLBProbe']);
    const plantForAlive = async () => {
      for (const rule of podRules(alive.ip, DEAD_MAC)) await r('ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...rule]);
    };
    await plantForAlive();
    // The firewall incident: a new node (10.240.0.9) is given 10.224.0.0/16 as its pod CIDR, and this node routes
    // it there, firewall subnet included.
    await r('ip', ['route', 'add', '10.224.0.0/16', 'via', '10.240.0.9', 'dev', 'azure0']);
    // A pass with no conflist for the network (a new node before cilium-agent writes it): an error in step network.
    await rename(agentConflist, `${agentConflist}.away`);
    expect(await onePass(agent)).toMatchObject({ errors: 1, steps: { network: 'error' } });
    await rename(`${agentConflist}.away`, agentConflist);
    // The pass that sees the conflist back: a retry of the failed one may still be in flight without it.
    const work = await onePass(agent, (p) => p.steps?.network !== 'error');
    expect(work, JSON.stringify(work)).toMatchObject({ leaked: 1, probeRestored: true, residueRemoved: 2, errors: 0 });
    expect(work.reservedPods).toBeGreaterThanOrEqual(1);
    // Within that one pass the incident's route reads 1.
    expect(work.reservedRoutes).toBeGreaterThanOrEqual(1);
    await waitFor('the captured route scraped', async () => (await value(incidentSeries)) === 1);
    // The agent's residue counter exists at 0 from the first pass that knew the network: the first removal is
    // an increase Prometheus sees (IpamShimAgentResidueRemoved below fires on it, no second removal needed).
    // Another config sorts before cilium's: the runtime would use it, without the shim.
    await writeFile(join(confDir, '00-other.conflist'), JSON.stringify({ cniVersion: '1.0.0', name: 'other', plugins: [{ type: 'bridge' }] }));
    const slowOut = await slow;
    expect(slowOut.exitCode, slowOut.stdout + slowOut.stderr).toBe(0);
    await new Promise((res) => setTimeout(res, 3000)); // > 2 s since the last pass (the lowered stall threshold)

    // --- every alert's expression now has a result ---
    const after = alerts.filter((a) => !AT_THE_END.has(a.alert)).map((a) => ({ a, expr: (AFTER_OVERRIDES[a.alert] ?? ((e: string) => e))(a.expr) }));
    await waitFor(
      'every alert to fire',
      async () => {
        const res = await query(after.map((x) => x.expr));
        after.forEach(({ a }, i) => {
          const t = table.get(a.alert)!;
          t.firedAfter = res[i]!.length > 0;
          // A `sum by` without job keeps instance: name the place by its target.
          t.jobs = [...new Set(res[i]!.map((x) => String(x.metric.job ?? jobOf(String(x.metric.instance)))))].sort();
          if (AFTER_OVERRIDES[a.alert]) t.note = `evaluated as: ${after[i]!.expr}`;
        });
        return after.every(({ a }) => table.get(a.alert)!.firedAfter);
      },
      30_000,
    ).catch(() => undefined);
    expect(after.filter(({ a }) => !table.get(a.alert)!.firedAfter).map(({ a }) => a.alert)).toEqual([]);
    // Every alert's result from the agent names the node (what its description says), not only IP:port.
    const named = await query(after.map((x) => x.expr));
    after.forEach(({ a }, i) => {
      for (const x of named[i]!.filter((r) => (r.metric.job ?? jobOf(String(r.metric.instance))) === AGENT_JOB))
        expect(x.metric.node, `${a.alert}: ${JSON.stringify(x.metric)}`).toBe(NODE_NAME);
    });
    // The plugin's alerts fire on both places: the agent's /metrics and node-exporter's textfile collector.
    for (const name of [
      'IpamShimReservedAddressRefused',
      'IpamShimCniErrors',
      'IpamShimResidueRemovedAtAdd',
      'IpamShimAgentIpsLost',
      'IpamShimSlowCniCalls',
    ]) {
      expect(table.get(name)!.jobs, name).toEqual([AGENT_JOB, 'node-exporter'].sort());
    }
    // The errors alert saw code 7, never 100 (that one has its own alert).
    const errs = await one(alerts.find((a) => a.alert === 'IpamShimCniErrors')!.expr);
    expect(new Set(errs.map((x) => x.metric.code))).toEqual(new Set(['7']));

    // Prometheus itself, evaluating the PrometheusRule's groups: every rule loaded healthy, and each alert tested
    // without an override is pending (its `for:` not yet served) or firing.
    const [rules] = await get(['/api/v1/rules']);
    const loaded = (rules!.data.groups as Obj[]).flatMap((g) => g.rules as Obj[]);
    expect(loaded.map((x) => x.name).sort()).toEqual(alerts.map((a) => a.alert).sort());
    expect(loaded.filter((x) => x.health !== 'ok')).toEqual([]);
    const expectActive = after.filter(({ a }) => !AFTER_OVERRIDES[a.alert]).map(({ a }) => a.alert);
    await waitFor('the rules to be pending or firing', async () => {
      const [res] = await get(['/api/v1/alerts']);
      const active = new Set((res!.data.alerts as Obj[]).map((x) => String(x.labels.alertname)));
      return expectActive.every((n) => active.has(n));
    });
    // The incident's alert names the route, its gateway and the firewall subnet.
    const captured = await one(alerts.find((a) => a.alert === 'IpamShimReservedSubnetRouteCaptured')!.expr);
    expect(captured.map((x) => x.metric)).toContainEqual(expect.objectContaining(INCIDENT));
    // The route goes: within one pass the series reads 0 and the alert's expression no longer holds for it.
    await r('ip', ['route', 'del', '10.224.0.0/16', 'via', '10.240.0.9', 'dev', 'azure0']);
    expect(await onePass(agent)).toMatchObject({ steps: { reserved: 'ok' } });
    await waitFor('the route gone in Prometheus', async () => (await value(incidentSeries)) === 0);
    const gone = await one(alerts.find((a) => a.alert === 'IpamShimReservedSubnetRouteCaptured')!.expr);
    expect(gone.map((x) => x.metric)).not.toContainEqual(expect.objectContaining(INCIDENT));
    console.log(`monitoring e2e: alerts checked in ${Date.now() - t0} ms`);
  });

  it('every dashboard query returns data (the agent job; the plugin panels also on node-exporter)', async () => {
    const dash = DASHBOARD;
    const panels = (dash.panels as Obj[]).filter((p) => p.type !== 'row');
    const subst = (expr: string, job: string) => expr.replaceAll('$__rate_interval', '5m').replaceAll('$job', job).replaceAll('$node', '.*');
    const targets = panels.flatMap((p) => (p.targets as Obj[]).map((t) => ({ panel: p.title as string, expr: String(t.expr) })));
    const res = await query(targets.map((t) => subst(t.expr, AGENT_JOB)));
    const rows = targets.map((t, i) => ({ ...t, rows: res[i]!.length }));
    console.log(rows.map((x) => `${x.panel} | ${x.expr} | ${x.rows}`).join('\n'));
    expect(rows.filter((x) => x.rows === 0)).toEqual([]);
    // The plugin's panels on node-exporter's textfile (nodes without the agent).
    const pluginOnly = targets.filter((t) => /ipam_shim_(invocations|errors|cni_call|reserved_refusals|residue_removed|ledger)/.test(t.expr));
    const viaNe = await query(pluginOnly.map((t) => subst(t.expr, 'node-exporter')));
    expect(pluginOnly.filter((_, i) => viaNe[i]!.length === 0)).toEqual([]);
    // The variables' queries: label values for $job and $node.
    const vars = (dash.templating.list as Obj[]).filter((v) => v.type === 'query');
    for (const v of vars) {
      const m = /^label_values\((.*), (\w+)\)$/.exec(String(v.definition));
      expect(m, v.definition).toBeTruthy();
      const [out] = await get([`/api/v1/label/${m![2]}/values?match[]=${encodeURIComponent(m![1]!.replaceAll('$job', AGENT_JOB))}`]);
      expect(out!.data, v.name).not.toEqual([]);
      if (v.name === 'job') expect(out!.data).toEqual([AGENT_JOB, 'node-exporter']);
    }
    if (PNG_DIR) await screenshot(targets, PNG_DIR);
  });

  it('IpamShimAgentDown fires once the agent stops answering, IpamShimAgentAbsent once no agent target is left', async () => {
    const alerts = ALERTS;
    const down = alerts.find((a) => a.alert === 'IpamShimAgentDown')!;
    const absent = alerts.find((a) => a.alert === 'IpamShimAgentAbsent')!;
    expect(await query([down.expr, absent.expr])).toEqual([[], []]);
    agent.proc.kill('SIGTERM');
    await agent.proc;
    await waitFor('IpamShimAgentDown to fire', async () => (await one(down.expr)).length === 1);
    expect((await one(absent.expr)).length).toBe(0);
    table.set('IpamShimAgentDown', { ...table.get('IpamShimAgentDown')!, firedAfter: true, jobs: [AGENT_JOB], note: 'after SIGTERM to the agent' });
    // The DaemonSet gone: the job's targets go (its pods are not there to discover), and Prometheus marks their
    // series stale at once (here: the job's target list emptied, the config reloaded).
    await prometheusConfig(false);
    const [reload] = await get([{ path: '/-/reload', method: 'POST' }]);
    expect(reload).toMatchObject({ status: 200 });
    await waitFor('IpamShimAgentAbsent to fire', async () => (await one(absent.expr)).length === 1);
    table.set('IpamShimAgentAbsent', {
      ...table.get('IpamShimAgentAbsent')!,
      firedAfter: true,
      jobs: [AGENT_JOB],
      note: "after the job's target was removed",
    });
  });
});
