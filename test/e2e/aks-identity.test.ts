// Issue 47's "done when", on the delegate AKS runs: azure-ipam over CNS (the stand-ins of test/support/doubles/cns.ts),
// in both of CNS's key schemes. CNS keys an allocation by the pod's identity from CNI_ARGS (`name:namespace`) or by
// the container ID; a delegate call that names no pod names the key ":" — whatever else was allocated that way.
// The node: ptp (1.1.0, cilium-cni's place) with azure-ipam as its IPAM, the shim chained after it with the same
// azure-ipam as its delegate, CNS serving on the node namespace's loopback; pods added through the runner and the
// real libcni (cnitool).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { mkdir, readdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { RUNTIMES, newRuntime, skipRuntime, type CniRuntime, type RuntimeKind } from '../support/runtimes/runtimes.js';
import { TestNet, rootOrSkip, uid } from '../support/net/netns.js';
import { shimKeys } from '../support/shim/conf.js';
import { agentIpArgv } from '../support/shim/chained-node.js';
import { agentArgs, agentGet, followAgent, type RunningAgent } from '../support/shim/agent.js';
import { FIXTURE_BIN, PLUGIN_DIR, SHIM, invoke, scratch, shimBinDir } from '../support/shim/cni.js';
import { CNS_SCHEMES, CnsStandin, overAzureIpam, type CnsScheme } from '../support/doubles/cns.js';
import { waitFor } from '../support/wait.js';
import { ErrorCode } from '../../src/cni/errors.js';

const root = rootOrSkip();
const POOL = { subnet: '10.77.0.0/24', first: '10.77.0.10', last: '10.77.0.30', gateway: '10.77.0.1' };
/** What containerd sends for a pod (go-cni's order), with the sandbox's ID. */
const podArgs = (name: string, cid: string) => `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=${name};K8S_POD_INFRA_CONTAINER_ID=${cid}`;

interface Bed {
  s: Awaited<ReturnType<typeof scratch>>;
  net: TestNet;
  node: string;
  network: string;
  scheme: CnsScheme;
  cns: CnsStandin;
  confList: any;
  conflistPath: string;
  cniPath: string;
  cacheDir: string;
  /** The shim's environment: where it looks for azure-ipam's delete queue (the stand-in's, not the host's). */
  env: Record<string, string>;
  owners: string[];
  agents: RunningAgent[];
}

async function makeBed(net: TestNet, scheme: CnsScheme): Promise<Bed> {
  const s = await scratch();
  net.defer(() => s.cleanup());
  const node = await net.netns('node');
  const cns = await CnsStandin.start({ scheme, pools: [POOL], dir: s.dir, netns: node, onCleanup: (stop) => net.defer(stop) });
  await mkdir(cns.deleteIDsDir);
  const network = `aks${uid()}`;
  const ipam = overAzureIpam({}, cns);
  const confList = {
    cniVersion: '1.1.0',
    name: network,
    plugins: [{ type: 'ptp-1.1', ipMasq: false, ipam }, shimKeys({ dirs: s, keys: { residue: { ebtables: false, neigh: false } }, delegate: ipam })],
  };
  await mkdir(join(s.dir, 'net.d'));
  const conflistPath = join(s.dir, 'net.d', '10-cilium.conflist');
  await writeFile(conflistPath, JSON.stringify(confList, null, 2));
  const cniPath = [await shimBinDir(s.dir), FIXTURE_BIN, PLUGIN_DIR].join(':');
  const bed: Bed = {
    s,
    net,
    node,
    network,
    scheme,
    cns,
    confList,
    conflistPath,
    cniPath,
    cacheDir: join(s.dir, 'cache'),
    env: { IPAM_SHIM_AZURE_DELETE_QUEUE: cns.deleteIDsDir },
    owners: [],
    agents: [],
  };
  net.defer(async () => {
    for (const a of bed.agents) a.proc.kill('SIGKILL');
    await Promise.allSettled(bed.agents.map((a) => a.proc));
    for (const owner of bed.owners) await execa('ip', ['netns', 'del', `ipam-shim-agent-${owner}`], { reject: false });
  });
  return bed;
}

const runtime = (b: Bed, kind: RuntimeKind, confList = b.confList): CniRuntime =>
  newRuntime(kind, { confList, pluginDirs: b.cniPath.split(':'), cacheDir: b.cacheDir, netns: b.node });

async function agentIp(b: Bed, action: string, owner: string) {
  if (!b.owners.includes(owner)) b.owners.push(owner);
  const r = await execa('ip', agentIpArgv({ node: b.node, action, owner, conflist: b.conflistPath, cniPath: b.cniPath }), {
    reject: false,
    env: b.env,
  });
  return { ...r, json: r.stdout ? JSON.parse(r.stdout) : undefined };
}

/** `agent-ip allocate` that must succeed: its answer. */
async function allocate(b: Bed, owner: string) {
  const r = await agentIp(b, 'allocate', owner);
  expect(r.exitCode, r.stderr + r.stdout).toBe(0);
  return r.json as { ips: string[]; action: string };
}

interface Pod {
  id: string;
  name: string;
  ns: string;
  ip: string;
}

async function pod(b: Bed, rt: CniRuntime, name: string): Promise<Pod> {
  const ns = await b.net.netns('pod');
  const id = `${name}-${uid(4)}`;
  const result: any = await rt.add(id, `/run/netns/${ns}`, 'eth0', podArgs(name, id));
  return { id, name, ns, ip: String(result.ips[0].address).split('/')[0]! };
}

/** A pod leaked behind the runtime's back: its result cache lost and its sandbox gone, no DEL. */
async function leak(b: Bed, rt: CniRuntime, name: string): Promise<Pod> {
  const p = await pod(b, rt, name);
  await unlink(rt.cacheFilePath(p.id));
  await execa('ip', ['netns', 'del', p.ns]);
  return p;
}

/** CNS's key for a pod / for an agent-ip owner, as the scheme keys it. */
const podKey = (b: Bed, p: Pod) => (b.scheme === 'pod' ? `${p.name}:default` : p.id);

/** The ledger's records: container ID → addresses. */
async function ledger(b: Bed): Promise<Record<string, string[]>> {
  const dir = join(b.s.stateDir, b.network, 'records');
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith('.json') && !n.startsWith('.'));
  const recs = await Promise.all(names.map(async (n) => JSON.parse(await readFile(join(dir, n), 'utf8')) as { containerID: string; ips: string[] }));
  return Object.fromEntries(recs.map((r) => [r.containerID, r.ips.map((ip) => ip.split('/')[0]!)]));
}

/** No address held by two: not in CNS (one key each), not in the ledger (one record each), and they agree. */
async function expectNoAddressHeldByTwo(b: Bed) {
  const cnsIps = Object.values(await b.cns.holdings()).flat();
  expect(new Set(cnsIps).size, JSON.stringify(await b.cns.holdings())).toBe(cnsIps.length);
  const ledgerIps = Object.values(await ledger(b)).flat();
  expect(new Set(ledgerIps).size, JSON.stringify(await ledger(b))).toBe(ledgerIps.length);
  for (const ip of ledgerIps) expect(cnsIps, `${ip} is in the ledger but CNS does not hold it`).toContain(ip);
}

/** The agent's key in CNS: the one holding `ip`, which must not be a pod's. */
async function agentKeyHolding(b: Bed, ip: string): Promise<string> {
  const key = await b.cns.holderOf(ip);
  expect(key, `CNS holds ${ip} for nobody: ${JSON.stringify(await b.cns.holdings())}`).toBeDefined();
  return key!;
}

const gcCli = (b: Bed, extra: string[] = []) =>
  execa(
    'ip',
    [
      ...['netns', 'exec', b.node, SHIM, 'gc', '--conflist', b.conflistPath, '--cni-path', b.cniPath],
      ...['--cache-dir', b.cacheDir, '--grace-seconds', '0', '--json', ...extra],
    ],
    { reject: false, env: b.env },
  );

/** The shim's GC verb, invoked as a runtime would on this 1.1.0 list. */
const gcVerb = (b: Bed, valid: Array<{ containerID: string; ifname: string }>) =>
  invoke(
    { ...b.confList.plugins[1], name: b.network, cniVersion: '1.1.0', 'cni.dev/valid-attachments': valid },
    { command: 'GC', path: b.cniPath.split(':'), inNetns: b.node, env: b.env },
  );

/** The node agent with the shim's entry already in the list (Cilium's route: verified, never edited). */
function startAgent(b: Bed, args: string[]): RunningAgent {
  const binDir = join(b.s.dir, 'opt-cni-bin');
  const n = { network: b.network, confDir: join(b.s.dir, 'net.d'), cniPath: b.cniPath, cacheDir: b.cacheDir, binDir };
  const proc = execa(
    'ip',
    ['netns', 'exec', b.node, SHIM, ...agentArgs(SHIM, n, { graceSeconds: 0 }), '--no-install', '--conflist', b.conflistPath, ...args],
    {
      reject: false,
      buffer: false,
      env: b.env,
    },
  );
  const a = followAgent(proc);
  b.agents.push(a);
  return a;
}

async function firstPass(a: RunningAgent): Promise<Record<string, any>> {
  await waitFor("the agent's first reconcile pass", () => a.passes().length >= 1, 30_000);
  return a.passes()[0]!;
}

describe.skipIf(!root).each(CNS_SCHEMES)('azure-ipam over CNS, %s key scheme', (scheme) => {
  const net = new TestNet();
  let b: Bed;
  beforeEach(async () => {
    b = await makeBed(net, scheme);
  });
  afterEach(() => net.cleanup());

  it('two owners hold two different addresses, and allocating one never releases the other', async () => {
    const health = await allocate(b, 'health');
    const ingress = await allocate(b, 'ingress');
    expect(ingress.ips).not.toEqual(health.ips);
    expect(await b.cns.held()).toEqual([...health.ips, ...ingress.ips].sort());
    const healthKey = await agentKeyHolding(b, health.ips[0]!);
    expect(await agentKeyHolding(b, ingress.ips[0]!)).not.toBe(healthKey);
    // Allocating again (a restart of cilium-agent) keeps both.
    const again = await allocate(b, 'ingress');
    expect(again.ips).toEqual(ingress.ips);
    expect(await b.cns.held()).toEqual([...health.ips, ...ingress.ips].sort());
    expect(await ledger(b)).toEqual({ 'cilium-agent-health': health.ips, 'cilium-agent-ingress': ingress.ips });
    await expectNoAddressHeldByTwo(b);
  });

  it('`agent-ip allocate` never says `reused` for an address CNS no longer holds', async () => {
    await allocate(b, 'health');
    // CNS restarts; the API server lists no pod holding the agent's address (cilium-agent's is no pod): forgotten.
    await b.cns.restart({ pods: [] });
    expect(await b.cns.held()).toEqual([]);
    // Whatever allocate answers, CNS holds what it reports (for the agent) when it returns.
    const kept = await allocate(b, 'health');
    expect(await b.cns.holderOf(kept.ips[0]!), `${kept.action}: ${JSON.stringify(await b.cns.holdings())}`).toBeDefined();
    // Forgotten again, and CNS rewrote the conflist without the shim at its start: a pod started then takes it.
    await b.cns.restart({ pods: [] });
    const bare = runtime(b, 'runner', { ...b.confList, plugins: [b.confList.plugins[0]] });
    const taker = await pod(b, bare, 'web-1');
    expect(taker.ip).toBe(kept.ips[0]);
    const again = await allocate(b, 'health');
    expect(again.action).not.toBe('reused');
    expect(again.ips).not.toContain(taker.ip);
    // What it reports, CNS holds for the agent.
    expect(await b.cns.holderOf(again.ips[0]!)).not.toBe(podKey(b, taker));
    expect(await b.cns.holderOf(again.ips[0]!)).toBeDefined();
  });

  it('after a CNS restart that forgot it, the agent re-allocates its address within one pass; no address is held by two', async () => {
    const health = await allocate(b, 'health');
    await b.cns.restart({ pods: [] });
    const bare = runtime(b, 'runner', { ...b.confList, plugins: [b.confList.plugins[0]] });
    const taker = await pod(b, bare, 'web-1');
    expect(taker.ip).toBe(health.ips[0]);
    const a = startAgent(b, ['--gc', 'report', '--interval', '3600']);
    expect(await firstPass(a)).toMatchObject({ agentIpsReallocated: 1 });
    const records = await ledger(b);
    expect(records['cilium-agent-health'], JSON.stringify(records)).toBeDefined();
    const now = records['cilium-agent-health']!;
    expect(now).not.toContain(taker.ip);
    expect(await b.cns.holderOf(now[0]!)).toBeDefined();
    expect(await b.cns.holderOf(now[0]!)).not.toBe(podKey(b, taker));
    const cnsIps = Object.values(await b.cns.holdings()).flat();
    expect(new Set(cnsIps).size).toBe(cnsIps.length);
    // `agent-ip list` shows where cilium-agent's operator will look.
    const list = await execa('ip', ['netns', 'exec', b.node, SHIM, 'agent-ip', 'list', '--conflist', b.conflistPath, '--json'], { env: b.env });
    expect(JSON.parse(list.stdout).agentIPs).toMatchObject([{ owner: 'health', ips: now }]);
    // Reported: a warning naming before and after, and the counter an alert reads.
    expect(a.lines().filter((l) => l.step === 'agent-ips' && l.owner === 'health')).toMatchObject([{ before: [taker.ip], after: now }]);
    const { body } = await agentGet(b.node, '/metrics');
    expect(body).toMatch(new RegExp(`^ipam_shim_agent_ip_reallocated_total\\{network="${b.network}"\\} 1$`, 'm'));
  });

  for (const kind of RUNTIMES) {
    describe.skipIf(skipRuntime(kind))(`pods through ${kind}`, () => {
      /** The agent's address, a live pod, and a leaked one (cache and sandbox gone). */
      async function world() {
        const rt = runtime(b, kind);
        const health = await allocate(b, 'health');
        const alive = await pod(b, rt, 'web-0');
        const leaked = await leak(b, rt, 'web-1');
        expect(await b.cns.held()).toEqual([health.ips[0]!, alive.ip, leaked.ip].sort());
        return { rt, agent: health.ips[0]!, alive, leaked };
      }
      /** Exactly the leaked pod's address is gone from CNS; the agent's and the live pod's stay, under their keys. */
      async function expectOnlyLeakReleased(w: Awaited<ReturnType<typeof world>>, agentKey: string) {
        expect(await b.cns.held()).toEqual([w.agent, w.alive.ip].sort());
        expect(await b.cns.holderOf(w.agent)).toBe(agentKey);
        expect(await b.cns.holderOf(w.alive.ip)).toBe(podKey(b, w.alive));
      }

      it("`ipam-shim gc --apply` releases exactly the leaked pod's address, never the agent's", async () => {
        const w = await world();
        const agentKey = await agentKeyHolding(b, w.agent);
        const r = await gcCli(b, ['--apply']);
        expect(r.exitCode, r.stderr + r.stdout).toBe(0);
        expect(JSON.parse(r.stdout).released).toEqual([{ containerID: w.leaked.id, ifname: 'eth0' }]);
        await expectOnlyLeakReleased(w, agentKey);
      });

      it("the GC verb releases exactly the leaked pod's address, never the agent's", async () => {
        const w = await world();
        const agentKey = await agentKeyHolding(b, w.agent);
        const out = await gcVerb(b, [{ containerID: w.alive.id, ifname: 'eth0' }]);
        expect(out.exitCode, out.stdout).toBe(0);
        await expectOnlyLeakReleased(w, agentKey);
      });

      it("the agent's GC pass releases exactly the leaked pod's address, never the agent's", async () => {
        const w = await world();
        const agentKey = await agentKeyHolding(b, w.agent);
        const a = startAgent(b, ['--gc', 'apply', '--interval', '3600']);
        const pass = await firstPass(a);
        expect(pass, JSON.stringify(a.lines().filter((l) => l.level >= 40))).toMatchObject({ released: 1, errors: 0 });
        await expectOnlyLeakReleased(w, agentKey);
      });

      it('`ipam-shim gc --apply` with CNS down says the release was queued by the delegate, not released', async () => {
        const w = await world();
        await b.cns.setMode('down');
        const r = await gcCli(b, ['--apply']);
        const report = JSON.parse(r.stdout);
        expect(report.released, r.stdout).toEqual([]);
        expect(report.queued).toEqual([{ containerID: w.leaked.id, ifname: 'eth0' }]);
        expect(await readFile(b.s.logFile, 'utf8')).toContain('queued by the delegate');
        expect(await readdir(b.cns.deleteIDsDir)).toEqual([w.leaked.id]);
        await b.cns.setMode('up');
        expect(await b.cns.held()).toContain(w.leaked.ip); // nothing released until CNS processes its queue
      });

      it('the GC verb with CNS down logs the release as queued by the delegate, not released', async () => {
        const w = await world();
        await b.cns.setMode('down');
        const out = await gcVerb(b, [{ containerID: w.alive.id, ifname: 'eth0' }]);
        expect(out.exitCode, out.stdout).toBe(0);
        const gcLine = (await readFile(b.s.logFile, 'utf8')).split('\n').filter((l) => l.includes(w.leaked.id));
        expect(gcLine.join('\n')).toContain('queued by the delegate');
        expect(gcLine.join('\n')).not.toMatch(/"msg":"[^"]*\breleased\b/);
        expect(await readdir(b.cns.deleteIDsDir)).toEqual([w.leaked.id]);
      });

      it("a pod handed an address the ledger holds for the agent is refused (11); the runtime's retry after the agent's pass gets another", async () => {
        const health = await allocate(b, 'health');
        await b.cns.restart({ pods: [] });
        const rt = runtime(b, kind);
        const ns = await b.net.netns('pod');
        const id = `web-1-${uid(4)}`;
        const add = () => rt.add(id, `/run/netns/${ns}`, 'eth0', podArgs('web-1', id));
        await expect(add()).rejects.toMatchObject({ code: ErrorCode.TryAgainLater, msg: expect.stringContaining('cilium-agent-health') });
        // kubelet: the sandbox torn down (DEL), then created again. Until the agent's pass re-allocates, CNS hands
        // the same free address again and the shim refuses it again.
        await rt.del(id, `/run/netns/${ns}`, 'eth0', podArgs('web-1', id));
        await expect(add()).rejects.toMatchObject({ code: ErrorCode.TryAgainLater });
        await rt.del(id, `/run/netns/${ns}`, 'eth0', podArgs('web-1', id));
        const a = startAgent(b, ['--gc', 'report', '--interval', '3600']);
        await firstPass(a);
        const retried: any = await add();
        const podIp = String(retried.ips[0].address).split('/')[0]!;
        const agentNow = (await ledger(b))['cilium-agent-health']!;
        expect(agentNow).toEqual(health.ips);
        expect(podIp).not.toBe(health.ips[0]);
        expect(await b.cns.holderOf(podIp)).toBe(b.scheme === 'pod' ? 'web-1:default' : id);
        await expectNoAddressHeldByTwo(b);
      });
    });
  }
});
