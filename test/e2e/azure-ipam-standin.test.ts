// The azure-ipam and CNS stand-ins' own boundary: each fact copied from the public source (docs/testing.md, "azure-ipam
// and CNS stand-ins") asserted once, in both of CNS's key schemes, so the suites that build on them stand on
// checked ground. The stand-in is called as a runtime calls a plugin (env + stdin).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FIXTURE_BIN } from '../support/paths.js';
import { CNS_SCHEMES, CnsStandin, overAzureIpam, type CnsOptions } from '../support/doubles/cns.js';
import { TestNet, rootOrSkip } from '../support/net/netns.js';

const AZURE_IPAM = join(FIXTURE_BIN, 'azure-ipam');
const POOLS = [
  { subnet: '10.77.0.0/24', first: '10.77.0.10', last: '10.77.0.12' },
  { subnet: 'fd00:77::/120', first: 'fd00:77::10', last: 'fd00:77::12' },
];
const WEB1 = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1;K8S_POD_INFRA_CONTAINER_ID=c1';

interface Call {
  command: string;
  containerID?: string;
  args?: string;
  cniVersion?: string;
  netns?: string;
  inNetns?: string;
}

let dir: string;
let cnsList: CnsStandin[];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'azipam-'));
  cnsList = [];
});
afterEach(async () => {
  for (const c of cnsList) await c.stop();
  await rm(dir, { recursive: true, force: true });
});

async function startCns(o: Partial<CnsOptions> & Pick<CnsOptions, 'scheme'>) {
  const cns = await CnsStandin.start({ pools: POOLS, dir, ...o });
  cnsList.push(cns);
  return cns;
}

/** azure-ipam called as a runtime calls it; `extra` goes into its config. */
async function azureIpam(cns: { url: string }, c: Call, extra: Record<string, unknown> = {}) {
  const conf = { cniVersion: c.cniVersion ?? '1.0.0', name: 'aks', ipam: overAzureIpam(extra, { url: cns.url }) };
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', CNI_COMMAND: c.command, CNI_PATH: FIXTURE_BIN };
  if (c.command !== 'GC' && c.command !== 'STATUS' && c.command !== 'VERSION') {
    Object.assign(env, { CNI_CONTAINERID: c.containerID ?? 'c1', CNI_IFNAME: 'eth0', CNI_ARGS: c.args ?? '' });
    if (c.command !== 'DEL') env.CNI_NETNS = c.netns ?? '/run/netns/no-such-pod';
  }
  const file = c.inNetns ? 'ip' : AZURE_IPAM;
  const argv = c.inNetns ? ['netns', 'exec', c.inNetns, AZURE_IPAM] : [];
  const r = await execa(file, argv, { input: JSON.stringify(conf), env, extendEnv: false, reject: false });
  return { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr, json: r.stdout ? JSON.parse(r.stdout) : undefined };
}

describe('azure-ipam stand-in: what libcni skel 1.3.0 answers for it', () => {
  it('VERSION: cniVersion 1.1.0, version.All', async () => {
    const r = await azureIpam({ url: 'http://127.0.0.1:1' }, { command: 'VERSION' });
    expect(r.json).toEqual({ cniVersion: '1.1.0', supportedVersions: ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] });
  });

  it('CHECK (from 0.4.0), GC and STATUS (at 1.1.0) answer success and ask CNS nothing; below those versions code 1', async () => {
    const cns = await startCns({ scheme: 'pod' });
    for (const [command, v] of [
      ['CHECK', '0.4.0'],
      ['CHECK', '1.1.0'],
      ['GC', '1.1.0'],
      ['STATUS', '1.1.0'],
    ] as const) {
      const r = await azureIpam(cns, { command, cniVersion: v, containerID: 'never-added' });
      expect(r.exitCode, `${command} ${v}: ${r.stdout}`).toBe(0);
      expect(r.stdout).toBe('');
    }
    for (const [command, v] of [
      ['CHECK', '0.3.1'],
      ['GC', '1.0.0'],
      ['STATUS', '1.0.0'],
    ] as const) {
      const r = await azureIpam(cns, { command, cniVersion: v });
      expect(r.exitCode).toBe(1);
      expect(r.json).toEqual({ code: 1, msg: `config version does not allow ${command}` });
    }
    expect(await cns.requests()).toEqual([]);
  });
});

describe.each(CNS_SCHEMES)('azure-ipam over the CNS stand-in, %s key scheme', (scheme) => {
  it('ADD: the identity from CNI_ARGS and the container ID; one address per family with the prefix length, no routes', async () => {
    const cns = await startCns({ scheme });
    const r = await azureIpam(cns, { command: 'ADD', containerID: 'c1', args: WEB1 });
    expect(r.exitCode, r.stdout).toBe(0);
    expect(r.json).toEqual({
      cniVersion: '1.0.0',
      ips: [{ address: '10.77.0.10/24' }, { address: 'fd00:77::10/120', gateway: 'fe80::1234:5678:9abc' }],
    });
    const [req] = await cns.requests();
    expect(req!.body).toMatchObject({
      podInterfaceID: 'c1',
      infraContainerID: 'c1',
      ifname: 'eth0',
      orchestratorContext: { podName: 'web-1', podNamespace: 'default' },
    });
    expect(await cns.holdings()).toEqual({ [scheme === 'pod' ? 'web-1:default' : 'c1']: ['10.77.0.10', 'fd00:77::10'] });
  });

  it('the result in the config version (0.2.0, 0.3.1, 1.1.0)', async () => {
    const cns = await startCns({ scheme, pools: [{ ...POOLS[0]!, gateway: '10.77.0.1' }] });
    const at = async (v: string) => (await azureIpam(cns, { command: 'ADD', cniVersion: v, args: WEB1 })).json;
    expect(await at('0.2.0')).toEqual({ cniVersion: '0.2.0', ip4: { ip: '10.77.0.10/24', gateway: '10.77.0.1' }, dns: {} });
    expect(await at('0.3.1')).toEqual({ cniVersion: '0.3.1', ips: [{ version: '4', address: '10.77.0.10/24', gateway: '10.77.0.1' }], dns: {} });
    expect(await at('1.1.0')).toEqual({ cniVersion: '1.1.0', ips: [{ address: '10.77.0.10/24', gateway: '10.77.0.1' }] });
  });

  it('a repeated request for a key returns what it holds; a release frees everything the key holds', async () => {
    const cns = await startCns({ scheme });
    const a = await azureIpam(cns, { command: 'ADD', containerID: 'c1', args: WEB1 });
    // The same pod re-created (another sandbox): one key in the pod-name scheme, two in the container-ID scheme.
    const b = await azureIpam(cns, { command: 'ADD', containerID: 'c2', args: WEB1 });
    if (scheme === 'pod') expect(b.json.ips).toEqual(a.json.ips);
    else expect(b.json.ips[0].address).toBe('10.77.0.11/24');
    const del = await azureIpam(cns, { command: 'DEL', containerID: 'c2', args: WEB1 });
    expect(del.exitCode, del.stdout).toBe(0);
    expect(del.stdout).toBe('');
    expect(await cns.held()).toEqual(scheme === 'pod' ? [] : ['10.77.0.10', 'fd00:77::10']);
  });

  it('a DEL that names no pod releases the key of empty CNI_ARGS (":" in the pod-name scheme), not the pod', async () => {
    const cns = await startCns({ scheme });
    await azureIpam(cns, { command: 'ADD', containerID: 'cilium-agent-health', args: '' });
    await azureIpam(cns, { command: 'ADD', containerID: 'c1', args: WEB1 });
    const del = await azureIpam(cns, { command: 'DEL', containerID: 'c1', args: '' });
    expect(del.exitCode).toBe(0);
    // The pod-name scheme releases the agent's address and keeps the pod's: the hazard issue 47 measured.
    expect(await cns.holdings()).toEqual(
      scheme === 'pod' ? { 'web-1:default': ['10.77.0.11', 'fd00:77::11'] } : { 'cilium-agent-health': ['10.77.0.10', 'fd00:77::10'] },
    );
  });

  it('CNS down: ADD fails 202; DEL queues the container ID under deleteIDs and succeeds; without the directory 11', async () => {
    const cns = await startCns({ scheme });
    await azureIpam(cns, { command: 'ADD', containerID: 'c1', args: WEB1 });
    await cns.setMode('down');
    const add = await azureIpam(cns, { command: 'ADD', containerID: 'c2', args: WEB1 });
    expect(add.exitCode).toBe(1);
    expect(add.json).toMatchObject({ code: 202, details: 'failed to request IP address from CNS' });
    const queue = join(dir, 'deleteIDs');
    const noDir = await azureIpam(cns, { command: 'DEL', containerID: 'c1', args: WEB1 }, { deleteIDsDir: queue });
    expect(noDir.json).toMatchObject({ code: 11, details: 'failed to add file to watcher with containerID c1' });
    await mkdir(queue);
    const del = await azureIpam(cns, { command: 'DEL', containerID: 'c1', args: WEB1 }, { deleteIDsDir: queue });
    expect(del.exitCode, del.stdout).toBe(0);
    expect(await readdir(queue)).toEqual(['c1']);
    expect(await readFile(join(queue, 'c1'), 'utf8')).toBe('c1');
    await cns.setMode('up');
    expect(await cns.held()).toEqual(['10.77.0.10', 'fd00:77::10']); // queued, not released
  });

  it('CNS slow (past the timeout): ADD fails 202, DEL is queued', async () => {
    const cns = await startCns({ scheme, slowMs: 1500 });
    await cns.setMode('slow');
    const queue = join(dir, 'deleteIDs');
    await mkdir(queue);
    const t0 = Date.now();
    const add = await azureIpam(cns, { command: 'ADD', containerID: 'c1', args: WEB1 }, { cnsTimeoutMs: 300 });
    expect(add.json).toMatchObject({ code: 202, msg: expect.stringContaining('TimeoutError') });
    const del = await azureIpam(cns, { command: 'DEL', containerID: 'c1', args: WEB1 }, { cnsTimeoutMs: 300, deleteIDsDir: queue });
    expect(del.exitCode, del.stdout).toBe(0);
    expect(Date.now() - t0).toBeLessThan(1500 + 1500);
    expect(await readdir(queue)).toEqual(['c1']);
  });

  it("the pool exhausted: ADD fails 202 naming CNS's message, and the failed request is released", async () => {
    const cns = await startCns({ scheme, pools: [{ subnet: '10.77.0.0/24', first: '10.77.0.10', last: '10.77.0.10' }] });
    await azureIpam(cns, { command: 'ADD', containerID: 'c1', args: WEB1 });
    const r = await azureIpam(cns, { command: 'ADD', containerID: 'c2', args: 'K8S_POD_NAME=web-2;K8S_POD_NAMESPACE=default' });
    expect(r.json).toMatchObject({ code: 202, msg: expect.stringContaining('not enough IPs available') });
    expect((await cns.requests()).map((q) => q.path.split('/').pop())).toEqual(['requestipconfigs', 'requestipconfigs', 'releaseipconfigs']);
  });

  it('a restart from the pod list frees what no listed pod holds; from its store keeps everything', async () => {
    const cns = await startCns({ scheme });
    await azureIpam(cns, { command: 'ADD', containerID: 'c1', args: WEB1 });
    await azureIpam(cns, { command: 'ADD', containerID: 'c2', args: 'K8S_POD_NAME=web-2;K8S_POD_NAMESPACE=default' });
    const before = await cns.holdings();
    await cns.restart('store');
    expect(await cns.holdings()).toEqual(before);
    await cns.restart({ pods: [{ ip: '10.77.0.11', podName: 'web-2', podNamespace: 'default', containerID: 'c2' }] });
    expect(await cns.holdings()).toEqual({ [scheme === 'pod' ? 'web-2:default' : 'c2']: ['10.77.0.11'] });
    // The forgotten address is the first free one again.
    const next = await azureIpam(cns, { command: 'ADD', containerID: 'c3', args: 'K8S_POD_NAME=web-3;K8S_POD_NAMESPACE=default' });
    expect(next.json.ips[0].address).toBe('10.77.0.10/24');
  });

  it('bad CNI_ARGS: ADD 201, DEL 11', async () => {
    const cns = await startCns({ scheme });
    expect((await azureIpam(cns, { command: 'ADD', args: 'K8S_POD_NAME' })).json).toMatchObject({ code: 201 });
    expect((await azureIpam(cns, { command: 'DEL', args: 'K8S_POD_NAME' })).json).toMatchObject({ code: 11 });
  });
});

const root = rootOrSkip();
describe.skipIf(!root)('the CNS stand-in inside a node network namespace', () => {
  const net = new TestNet();
  afterEach(() => net.cleanup());

  it("serves on that namespace's loopback: a plugin run there reaches it, the test process's loopback does not", async () => {
    const node = await net.netns('node');
    const cns = await CnsStandin.start({ scheme: 'pod', pools: POOLS, dir, netns: node, onCleanup: (stop) => net.defer(stop) });
    const there = await azureIpam(cns, { command: 'ADD', args: WEB1, inNetns: node });
    expect(there.exitCode, there.stdout + there.stderr).toBe(0);
    const here = await azureIpam(cns, { command: 'ADD', containerID: 'c2', args: 'K8S_POD_NAME=web-2;K8S_POD_NAMESPACE=default' });
    expect(here.json).toMatchObject({ code: 202 });
    expect(await cns.holdings()).toEqual({ 'web-1:default': ['10.77.0.10', 'fd00:77::10'] });
  });
});
