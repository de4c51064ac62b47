// The cilium-cni stand-in (test/fixtures/cilium-cni/) against the boundary measured on the real cilium-cni 1.17.5
// (issue 41) and read from Cilium's and libcni's source: versions, the agent's API, the delegated IPAM plugin, the
// datapath it leaves. Through the real libcni (the cnitool harness) and the runner, on a node netns.
import { describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PLUGINS_110, RUNTIMES, newRuntime, skipPlugins110, skipRuntime, type RuntimeKind } from '../support/runtimes/runtimes.js';
import { inNs, rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { type CiliumLine, ciliumCni, ciliumCniDir } from '../support/shim/cilium.js';
import { hostLocal } from '../support/shim/conf.js';
import { PLUGIN_DIR, hostLocalAllocations } from '../support/shim/cni.js';

const root = rootOrSkip();
const OLD = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0'];
const REFUSED = {
  code: 1,
  msg: 'incompatible CNI versions',
  details: 'config is "1.1.0", plugin supports ["0.1.0" "0.2.0" "0.3.0" "0.3.1" "0.4.0" "1.0.0"]',
};

const { s, net } = useScratchNet();
const a = useCiliumAgent({ routerIPv6: 'fd00:23::1' });

async function bed(kind: RuntimeKind, line: CiliumLine, cniVersion: string, subnets: string[] = ['10.91.0.0/24'], waits = {}) {
  const node = await net.netns('node');
  const pod = await net.netns('pod');
  const network = `cs${uid()}`;
  const confList = { cniVersion, name: network, plugins: [ciliumCni(hostLocal(s.dataDir, ...subnets))] };
  const log = join(s.dir, 'standin.log');
  const runtime = newRuntime(kind, {
    confList,
    pluginDirs: [ciliumCniDir(line), cniVersion === '1.1.0' ? PLUGINS_110 : PLUGIN_DIR],
    cacheDir: join(s.dir, 'cache'),
    netns: node,
    env: { ...a.agent.env(waits), CILIUM_CNI_STANDIN_LOG: log },
  });
  return { node, pod, network, runtime, podPath: `/run/netns/${pod}`, log };
}

async function standinLog(file: string): Promise<any[]> {
  try {
    return (await readFile(file, 'utf8'))
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
  } catch {
    return [];
  }
}

for (const kind of RUNTIMES)
  (root && !skipRuntime(kind) && !skipPlugins110() ? describe : describe.skip)(`cilium-cni stand-in through ${kind}`, () => {
    it('VERSION per line', async () => {
      const b17 = await bed(kind, '1.17', '1.0.0');
      expect(await b17.runtime.version('cilium-cni')).toEqual({ cniVersion: '1.1.0', supportedVersions: OLD });
      const bn = await bed(kind, 'newer', '1.1.0');
      expect(await bn.runtime.version('cilium-cni')).toEqual({ cniVersion: '1.1.0', supportedVersions: [...OLD, '1.1.0'] });
    });

    it("1.17 refuses a 1.1.0 list on every verb with libcni skel's own error, the agent never asked", async () => {
      const b = await bed(kind, '1.17', '1.1.0');
      await expect(b.runtime.add('c1', b.podPath)).rejects.toMatchObject(REFUSED);
      await expect(b.runtime.del('c1', b.podPath)).rejects.toMatchObject(REFUSED);
      await expect(b.runtime.status()).rejects.toMatchObject({ code: 1, msg: 'plugin version does not allow STATUS' });
      expect(a.agent.requests).toEqual([]);
      expect(await hostLocalAllocations(s.dataDir, b.network)).toEqual([]);
    });

    it.each([
      ['1.17', '1.0.0'],
      ['1.17', '0.3.1'],
      ['newer', '1.1.0'],
    ] as const)('%s at %s: ADD leaves the datapath cilium-cni leaves; ping both ways; DEL releases', async (line, v) => {
      const b = await bed(kind, line, v, ['10.91.0.0/24', 'fd00:91::/64']);
      const r: any = await b.runtime.add('c1', b.podPath, 'eth0', 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web');
      expect(r.cniVersion).toBe(v);
      const lxc = r.interfaces[0].name as string;
      expect(lxc).toMatch(/^lxc[0-9a-f]{12}$/);
      expect(r.interfaces[1]).toMatchObject({ name: 'eth0', sandbox: b.podPath });
      // IPv6 first, then IPv4, both on the pod's interface (index 1), as host routes via the router address.
      const ips = r.ips.map((x: any) => x.address);
      expect(ips[0]).toMatch(/^fd00:91::[0-9a-f]+\/128$/);
      expect(ips[1]).toMatch(/^10\.91\.0\.\d+\/32$/);
      expect(r.ips.map((x: any) => x.interface)).toEqual([1, 1]);
      expect(r.ips[1].gateway).toBe('169.254.23.1');
      expect(r.routes).toEqual([
        { dst: 'fd00:23::1/128' },
        { dst: '::/0', gw: 'fd00:23::1' },
        { dst: '169.254.23.1/32' },
        { dst: '0.0.0.0/0', gw: '169.254.23.1' },
      ]);
      const v4 = ips[1].split('/')[0];
      const v6 = ips[0].split('/')[0];
      const podRoutes = (await inNs(b.pod, 'ip', ['-4', 'route', 'show'])).stdout;
      expect(podRoutes).toContain('default via 169.254.23.1 dev eth0');
      expect(podRoutes).toContain('169.254.23.1 dev eth0 scope link');
      expect((await inNs(b.node, 'ip', ['-4', 'route', 'show', `${v4}/32`])).stdout).toContain(`dev ${lxc}`);
      expect((await inNs(b.node, 'ping', ['-c', '1', '-W', '2', v4])).exitCode).toBe(0);
      expect((await inNs(b.pod, 'ping', ['-c', '1', '-W', '2', '169.254.23.1'])).exitCode).toBe(0);
      expect((await inNs(b.node, 'ping', ['-6', '-c', '1', '-W', '2', v6])).exitCode).toBe(0);
      expect((await inNs(b.pod, 'ping', ['-6', '-c', '1', '-W', '2', 'fd00:23::1'])).exitCode).toBe(0);
      expect(a.agent.endpoints.get('cni-attachment-id:c1:eth0')).toMatchObject({ 'k8s-pod-name': 'web', addressing: { ipv4: v4 } });
      expect(await hostLocalAllocations(s.dataDir, b.network)).toHaveLength(2);
      if (v !== '0.3.1') await b.runtime.check('c1', b.podPath);
      await b.runtime.del('c1', b.podPath);
      expect(await hostLocalAllocations(s.dataDir, b.network)).toEqual([]);
      expect(a.agent.endpoints.size).toBe(0);
      expect((await inNs(b.node, 'ip', ['link', 'show', lxc], { reject: false })).exitCode).not.toBe(0);
      // CHECK is not forwarded to IPAM: host-local saw ADD and DEL only.
      expect((await standinLog(b.log)).flatMap((e) => e.events.filter((x: any) => x.delegate).map((x: any) => x.command))).toEqual(['ADD', 'DEL']);
    });

    it('agent down: ADD fails 999 with the real text after the configured wait and never calls the delegate', async () => {
      const b = await bed(kind, '1.17', '1.0.0', undefined, { connect: 1.5 });
      await a.agent.down();
      const t0 = Date.now();
      const err: any = await b.runtime.add('c1', b.podPath).catch((e) => e);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
      expect(err.code).toBe(999);
      expect(err.msg).toBe(
        `unable to connect to Cilium agent: failed to create cilium agent client after 1.500000 seconds timeout: Get "http://${a.agent.socketPath}/v1/config": dial unix ${a.agent.socketPath}: connect: no such file or directory`,
      );
      expect(await hostLocalAllocations(s.dataDir, b.network)).toEqual([]);
      expect((await standinLog(b.log))[0].events).toEqual([]);
    });

    it('agent down at DEL: 999 after the wait, the delegate not called, the address stays until a retry', async () => {
      const b = await bed(kind, '1.17', '1.0.0', undefined, { del: 1 });
      await b.runtime.add('c1', b.podPath);
      const held = await hostLocalAllocations(s.dataDir, b.network);
      expect(held).toHaveLength(1);
      await a.agent.down();
      await expect(b.runtime.del('c1', b.podPath)).rejects.toMatchObject({
        code: 999,
        msg: expect.stringMatching(/^unable to connect to Cilium agent: /),
      });
      expect(await hostLocalAllocations(s.dataDir, b.network)).toEqual(held);
      await a.agent.up();
      await b.runtime.del('c1', b.podPath);
      expect(await hostLocalAllocations(s.dataDir, b.network)).toEqual([]);
    });

    it('a delegate that fails ADD: its error comes back unchanged and nothing is left', async () => {
      const b = await bed(kind, '1.17', '1.0.0', ['10.91.0.0/32']); // host-local: no usable address in a /32
      const err: any = await b.runtime.add('c1', b.podPath).catch((e) => e);
      expect(err.msg).toBe('invalid range set 0: Network 10.91.0.0/32 too small to allocate from');
      expect((await inNs(b.node, 'ip', ['-o', 'link'])).stdout).not.toMatch(/lxc/);
      expect(a.agent.endpoints.size).toBe(0);
    });

    it('a step after the delegate fails (the agent refuses the endpoint): the delegate gets its DEL, the veth goes', async () => {
      const b = await bed(kind, '1.17', '1.0.0');
      a.agent.refuseEndpoints = true;
      const err: any = await b.runtime.add('c1', b.podPath).catch((e) => e);
      expect(err.code).toBe(999);
      expect(err.msg).toMatch(/^unable to create endpoint: /);
      expect(await hostLocalAllocations(s.dataDir, b.network)).toEqual([]);
      expect((await inNs(b.node, 'ip', ['-o', 'link'])).stdout).not.toMatch(/lxc/);
      expect((await standinLog(b.log))[0].events.map((x: any) => x.command)).toEqual(['ADD', 'DEL']);
    });

    it('newer: STATUS asks the agent (code 50 when it is down); GC is answered by skel and reaches no IPAM', async () => {
      const b = await bed(kind, 'newer', '1.1.0', undefined, { connect: 0.5 });
      await b.runtime.add('c1', b.podPath);
      await b.runtime.status();
      await b.runtime.gc([{ containerID: 'c1', ifname: 'eth0' }]);
      expect(await hostLocalAllocations(s.dataDir, b.network)).toHaveLength(1);
      expect((await standinLog(b.log)).flatMap((e) => e.events.map((x: any) => x.command))).toEqual(['ADD', 'STATUS']);
      await a.agent.down();
      await expect(b.runtime.status()).rejects.toMatchObject({ code: 50, msg: 'DaemonDown' });
      await a.agent.up();
      await b.runtime.del('c1', b.podPath);
    });
  });
