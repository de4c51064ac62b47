// Issue 47's measurements 1 and 2, through the built executable, over a delegate keyed as CNS keys a pod's
// addresses (test/fixtures/bin/keyed-ipam: K8S_POD_NAME:K8S_POD_NAMESPACE from CNI_ARGS, a repeated ADD returns
// the key's address, DEL frees everything the key holds, CHECK always succeeds). Not the azure-ipam/CNS stand-in
// (that is test support's, with its own suites): the smallest delegate whose key is the pod, as the probe was.
// The shim is in ptp's IPAM slot of a 1.1.0 list; the runtime is the project's libcni-like runner.
import { afterEach, beforeEach, expect, it, describe } from 'vitest';
import { execa } from 'execa';
import { mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CniRunner } from '../support/runtimes/runner.js';
import { TestNet, rootOrSkip, uid } from '../support/net/netns.js';
import { shimKeys } from '../support/shim/conf.js';
import { agentIpArgv } from '../support/shim/chained-node.js';
import { FIXTURE_BIN, PLUGIN_DIR, SHIM, invoke, scratch, shimBinDir } from '../support/shim/cni.js';
import { agentArgs, agentGet, followAgent } from '../support/shim/agent.js';
import { waitFor } from '../support/wait.js';
import { parseMetrics, seriesKey } from '../../src/metrics.js';

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
}
let b: Bed;

beforeEach(async () => {
  if (!root) return;
  const s = await scratch();
  const net = new TestNet();
  const node = await net.netns('node');
  const network = `kid${uid()}`;
  const delegate = { type: 'keyed-ipam', dataDir: s.dataDir, subnet: '10.77.0.0/24', rangeStart: '10.77.0.10', rangeEnd: '10.77.0.60' };
  const confList = {
    cniVersion: '1.1.0',
    name: network,
    plugins: [{ type: 'ptp-1.1', ipMasq: false, ipam: shimKeys({ dirs: s, keys: { residue: { ebtables: false, neigh: false } }, delegate }) }],
  };
  await mkdir(join(s.dir, 'net.d'));
  const conflistPath = join(s.dir, 'net.d', '10-cilium.conflist');
  await writeFile(conflistPath, JSON.stringify(confList, null, 2));
  const bin = await shimBinDir(s.dir);
  const cniPath = [bin, FIXTURE_BIN, PLUGIN_DIR].join(':');
  const runner = new CniRunner({ confList, pluginDirs: cniPath.split(':'), cacheDir: join(s.dir, 'cache'), netns: node });
  b = { s, net, node, network, conflistPath, confList, runner, cniPath, owners: [] };
});

afterEach(async () => {
  if (!root) return;
  for (const owner of b.owners) await execa('ip', ['netns', 'del', `ipam-shim-agent-${owner}`], { reject: false });
  await b.net.cleanup();
  await b.s.cleanup();
});

/** The keyed store: key (`name:namespace`) → address. */
const store = async (): Promise<Record<string, string>> => {
  try {
    return JSON.parse(await readFile(join(b.s.dataDir, `keyed-${b.network}.json`), 'utf8'));
  } catch {
    return {};
  }
};
/** Every delegate call, as "COMMAND CONTAINERID CNI_ARGS". */
const calls = async () => (await readFile(join(b.s.dataDir, `keyed-${b.network}.log`), 'utf8').catch(() => '')).trim().split('\n');

async function agentIp(action: string, owner: string) {
  if (!b.owners.includes(owner)) b.owners.push(owner);
  const r = await execa('ip', agentIpArgv({ node: b.node, action, owner, conflist: b.conflistPath, cniPath: b.cniPath }), { reject: false });
  return { ...r, json: r.stdout ? JSON.parse(r.stdout) : undefined };
}

/** A pod that lived and died without its runtime's DEL: ADD with its CNI_ARGS, then sandbox and cache entry gone. */
async function leakedPod(containerID: string, name: string) {
  const ns = await b.net.netns('pod');
  const result: any = await b.runner.add(containerID, `/run/netns/${ns}`, 'eth0', `K8S_POD_NAMESPACE=default;K8S_POD_NAME=${name}`);
  await execa('ip', ['netns', 'del', ns]);
  await unlink(b.runner.cacheFilePath(containerID));
  return String(result.ips[0].address).split('/')[0]!;
}

const HEALTH_KEY = 'cilium-agent-health.ipam-shim:kube-system';

d('a delegate keyed by the pod (as CNS keys it): every DEL names the attachment it releases', () => {
  it('measurement 1: two owners hold two addresses, and allocating one never releases the other', async () => {
    const health = await agentIp('allocate', 'health');
    expect(health.exitCode, health.stderr + health.stdout).toBe(0);
    const ingress = await agentIp('allocate', 'ingress');
    expect(ingress.exitCode, ingress.stderr + ingress.stdout).toBe(0);
    expect(ingress.json.ips).not.toEqual(health.json.ips);
    expect(await store()).toEqual({ [HEALTH_KEY]: health.json.ips[0], 'cilium-agent-ingress.ipam-shim:kube-system': ingress.json.ips[0] });
    // Allocating again (a restart) keeps both: CHECK proves nothing here, a repeated ADD for the identity does.
    const again = await agentIp('allocate', 'health');
    expect(again.json).toMatchObject({ action: 'reused', ips: health.json.ips, verifiedBy: 'add' });
    expect(Object.keys(await store())).toHaveLength(2);
    const list = await execa('ip', ['netns', 'exec', b.node, SHIM, 'agent-ip', 'list', '--conflist', b.conflistPath, '--json']);
    expect(JSON.parse(list.stdout).agentIPs).toMatchObject([
      { owner: 'health', verified: 'add', identity: expect.stringContaining('K8S_POD_NAME=cilium-agent-health.ipam-shim') },
      { owner: 'ingress', verified: null, identity: expect.stringContaining('K8S_POD_NAME=cilium-agent-ingress.ipam-shim') },
    ]);
  });

  it("measurement 2: `ipam-shim gc --apply` releases the leaked pod's address, never cilium-agent's", async () => {
    const health = await agentIp('allocate', 'health');
    expect(health.exitCode, health.stderr + health.stdout).toBe(0);
    const leaked = await leakedPod('pod-web-1', 'web-1');
    expect(await store()).toEqual({ [HEALTH_KEY]: health.json.ips[0], 'web-1:default': leaked });
    const r = await execa(
      'ip',
      [
        ...['netns', 'exec', b.node, SHIM, 'gc', '--conflist', b.conflistPath, '--cni-path', b.cniPath],
        ...['--cache-dir', join(b.s.dir, 'cache'), '--grace-seconds', '0', '--apply', '--allow-empty-cache', '--json'],
      ],
      { reject: false },
    );
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    expect(JSON.parse(r.stdout).released).toEqual([{ containerID: 'pod-web-1', ifname: 'eth0' }]);
    expect(await store()).toEqual({ [HEALTH_KEY]: health.json.ips[0] });
    expect((await calls()).filter((c) => c.startsWith('DEL pod-web-1'))).toEqual(['DEL pod-web-1 K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1']);
  });

  it("the GC verb releases the leaked pod's address under its recorded CNI_ARGS, never cilium-agent's", async () => {
    const health = await agentIp('allocate', 'health');
    expect(health.exitCode, health.stderr + health.stdout).toBe(0);
    await leakedPod('pod-web-2', 'web-2');
    const out = await invoke(
      { ...b.confList.plugins[0], name: b.network, cniVersion: '1.1.0', 'cni.dev/valid-attachments': [] },
      { command: 'GC', path: b.cniPath.split(':'), inNetns: b.node },
    );
    expect(out.exitCode, out.stdout).toBe(0);
    expect(await store()).toEqual({ [HEALTH_KEY]: health.json.ips[0] });
  });
});

d('the node agent and an IPAM store that forgot an agent address', () => {
  it('re-allocates it under the same identity within one pass: a log line, a counter, the new address in agent-ip list', async () => {
    const health = await agentIp('allocate', 'health');
    expect(health.exitCode, health.stderr + health.stdout).toBe(0);
    const was = health.json.ips[0] as string;
    // CNS restarted and rebuilt its assignments from the node's pods: health's key is gone and its address is a
    // pod's now (one the shim never saw: started while the shim was out of the chain).
    await writeFile(join(b.s.dataDir, `keyed-${b.network}.json`), JSON.stringify({ 'other:default': was }));
    const node = {
      network: b.network,
      confDir: join(b.s.dir, 'net.d'),
      cniPath: b.cniPath,
      cacheDir: join(b.s.dir, 'cache'),
      binDir: join(b.s.dir, 'bin'),
    };
    const proc = execa('ip', ['netns', 'exec', b.node, SHIM, ...agentArgs(SHIM, node, { graceSeconds: 0 }), '--no-install', '--interval', '3600'], {
      reject: false,
      buffer: false,
    });
    const a = followAgent(proc);
    try {
      await waitFor('the first pass', () => a.passes().length >= 1);
      expect(a.passes()[0]).toMatchObject({ agentIpsChecked: 1, agentIpsReallocated: 1, agentIpsUnverified: 0 });
      const now = (await store())[HEALTH_KEY];
      expect(now).toBeDefined();
      expect(now).not.toBe(was);
      // No address held by two: the pod keeps its address, the ledger names health's new one.
      expect(await store()).toEqual({ 'other:default': was, [HEALTH_KEY]: now });
      const line = a.lines().find((l) => l.step === 'agent-ips' && l.level === 'warn');
      expect(line).toMatchObject({ owner: 'health', before: [was], after: [now] });
      const list = await execa('ip', ['netns', 'exec', b.node, SHIM, 'agent-ip', 'list', '--conflist', b.conflistPath, '--json']);
      expect(JSON.parse(list.stdout).agentIPs).toMatchObject([{ owner: 'health', ips: [now] }]);
      const { body } = await agentGet(b.node, '/metrics');
      expect(parseMetrics(body).get(seriesKey('ipam_shim_agent_ip_reallocated_total', { network: b.network }))?.value).toBe(1);
    } finally {
      proc.kill('SIGKILL');
      await proc;
    }
  });
});
