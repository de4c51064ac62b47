// The IPv6 LB probe rewrite end to end: the BUILT plugin, driven by the libcni-like runner from inside a node
// netns, attaches pods through the cilium-cni stand-in (the 1.17 line, docs/testing.md) in both placements, and
// real probe packets prove it:
//   netns lb (fe80::1234:5678:9abc only) ── eth0 ── netns node6 (fe80::1, forwarding, runs the plugins) ── lxc ── pods
// node6 reaches each pod by cilium-cni's /128 endpoint route through its lxc; the pod answers via the router address.
// Azure's load balancer probes from a link-local address, which node6 must not forward ("Beyond scope"); the
// shim's ADD installs table ip6 azureSLBProbe, which rewrites the source, and the probes are answered.
import { execa } from 'execa';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runInNetns, type Run } from '../../src/effects/exec.js';
import { ledgerRecords, PLUGIN_DIR, pluginOutput, scratch, SHIM, shimBinDir } from '../support/shim/cni.js';
import { shimKeys } from '../support/shim/conf.js';
import { rootOrSkip, TestNet } from '../support/net/netns.js';
import { bpfFilterArgs, ping, probeTopology, UPLINK, watchPodInput as watchInput } from '../support/net/probe-topology.js';
import { CniRunner, type JsonObject } from '../support/runtimes/runner.js';
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { ciliumCni, ciliumCniDir } from '../support/shim/cilium.js';

const root = rootOrSkip();
const TABLE = 'azureSLBProbe'; // AgentBaker's name: a contract, spelled out here on purpose
const SHIM_RANGE = 'fd00:10:240::/64';
const PLAIN_RANGE = 'fd00:10:241::/64';
/** cilium-agent's --local-router-ipv6 (outside both pod ranges): the pods' IPv6 gateway. Without one, cilium-cni ignores IPv6. */
const ROUTER_IPV6 = 'fd00:10:ff::1';

type Placement = 'chained' | 'ipam';
type Mode = 'auto' | 'on' | 'off';

interface Bed {
  net: TestNet;
  s: Awaited<ReturnType<typeof scratch>>;
  node: string;
  lb: string;
  inNode: Run;
  inLb: Run;
  bin: string;
  /** The environment cilium-cni gets (the agent's socket and waits). */
  env: Record<string, string>;
}

/** lb ── node6 exactly as verified in the field notes; lb routes both pod ranges via node6. */
async function makeBed(net: TestNet, env: Record<string, string>): Promise<Bed> {
  const s = await scratch();
  net.defer(() => s.cleanup());
  const topo = await probeTopology(net, ['fd00:10::/32']);
  return { net, s, ...topo, bin: await shimBinDir(s.dir), env };
}

const hostLocal = (s: Bed['s'], family: 4 | 6, subnet = SHIM_RANGE) => ({
  type: 'host-local',
  dataDir: s.dataDir,
  ranges: [[{ subnet: family === 6 ? subnet : '10.244.7.0/24' }]],
  routes: [{ dst: family === 6 ? '::/0' : '0.0.0.0/0' }],
});

/** The node's conflist with the shim in `placement`; written to a file so the CLI can read the same settings. */
async function shimConflist(
  bed: Bed,
  placement: Placement,
  o: { mode?: Mode; family?: 4 | 6; name?: string } = {},
): Promise<{ list: JsonObject; file: string }> {
  const delegate = hostLocal(bed.s, o.family ?? 6);
  const shim = shimKeys({ dirs: bed.s, delegate, keys: o.mode ? { ipv6ProbeRewrite: o.mode } : {} });
  const name = o.name ?? 'probe6';
  const list: JsonObject =
    placement === 'chained'
      ? { cniVersion: '1.0.0', name, plugins: [ciliumCni(delegate), shim] }
      : { cniVersion: '1.0.0', name, plugins: [ciliumCni(shim)] };
  const file = join(bed.s.dir, `${name}-${o.mode ?? 'default'}-${o.family ?? 6}.conflist`);
  await writeFile(file, JSON.stringify(list));
  return { list, file };
}

/** A runtime on node6: every plugin runs inside the node netns (CniRunner's `netns`), cilium-cni 1.17 first on its path. */
function runtime(bed: Bed, list: JsonObject): CniRunner {
  return new CniRunner({
    confList: list,
    pluginDirs: [ciliumCniDir('1.17'), bed.bin, PLUGIN_DIR],
    cacheDir: join(bed.s.dir, 'cni-cache'),
    netns: bed.node,
    env: bed.env,
  });
}

/** ADD of a fresh pod netns; returns the pod's netns and its first address. */
async function addPod(bed: Bed, runner: CniRunner, containerID: string): Promise<{ pod: string; ip: string }> {
  const pod = await bed.net.netns('pod');
  const result = await runner.add(containerID, `/run/netns/${pod}`, 'eth0');
  const address = (result.ips as Array<{ address: string }> | undefined)?.[0]?.address;
  if (!address) throw new Error(`no IP in ${JSON.stringify(result)}`);
  return { pod, ip: address.split('/')[0]! };
}

/** A counter on the pod's input path: what actually arrives, and from where. Set up before any ADD. */
const watchPodInput = (pod: string) => watchInput(runInNetns(pod));

/**
 * Waits until no address in these netns is still tentative (DAD): a reply leaves the pod only once its address
 * and the node's side of the link (lxc's link-local address, the source of its neighbour answers) are usable,
 * probe rewrite or not.
 */
async function settled(...netns: string[]): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (const ns of netns) {
    for (;;) {
      const out = (await runInNetns(ns)('ip', ['-6', '-j', 'addr', 'show', 'tentative'])).stdout;
      const tentative = (JSON.parse(out || '[]') as Array<{ addr_info?: unknown[] }>).some((l) => (l.addr_info ?? []).length > 0);
      if (!tentative) break;
      if (Date.now() > deadline) throw new Error(`addresses in ${ns} still tentative after 10 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Tables in node6 ("family name") and the rules of ours. */
async function nodeTables(inNode: Run): Promise<{ tables: string[]; ourRules: number }> {
  const out = JSON.parse((await inNode('nft', ['-j', 'list', 'ruleset'])).stdout) as { nftables: Array<Record<string, any>> };
  const tables = out.nftables.filter((o) => o.table).map((o) => `${o.table.family} ${o.table.name}`);
  const ourRules = out.nftables.filter((o) => o.rule && o.rule.family === 'ip6' && o.rule.table === TABLE).length;
  return { tables, ourRules };
}

/** The operator CLI of the built executable, inside node6 (as an operator would run it on that node). */
async function cli(bed: Bed, args: string[]): Promise<{ exitCode: number; stdout: string; stderr: string; json: any }> {
  const r = await execa('ip', ['netns', 'exec', bed.node, SHIM, 'probe-rewrite', ...args], { reject: false, env: { CNI_COMMAND: '' } });
  return pluginOutput(r);
}

describe.skipIf(!root).each<Placement>(['chained', 'ipam'])('IPv6 probes through the shim (%s placement)', (placement) => {
  // Before the netns cleanup: hooks run as a stack, so the agent stops after it.
  const a = useCiliumAgent({ routerIPv6: ROUTER_IPV6 });
  let bed: Bed;
  beforeEach(async () => {
    bed = await makeBed(new TestNet(), a.agent.env());
  });
  afterEach(() => bed.net.cleanup());

  it('probes die at the node before the shim’s ADD; after it the pod gets them from the global address and replies return', async () => {
    // Before: a pod attached the way the node did it without the shim (cilium-cni + its IPAM alone) is routable,
    // yet the probe dies at the node and the pod sees nothing; the pod the shim will attach sees nothing either.
    const plain = runtime(bed, { cniVersion: '1.0.0', name: 'plain6', plugins: [ciliumCni(hostLocal(bed.s, 6, PLAIN_RANGE))] });
    const control = await addPod(bed, plain, 'plain-pod');
    const controlSeen = await watchPodInput(control.pod);
    const target = await bed.net.netns('pod');
    const targetSeen = await watchPodInput(target);
    await settled(bed.node, control.pod);
    const before = await ping(bed.inLb, control.ip);
    expect(before.exitCode).not.toBe(0);
    expect(before.stdout).toMatch(/Beyond scope of source address/);
    expect(await controlSeen()).toEqual({ echo: 0, fromGlobal: 0 });
    expect(await targetSeen()).toEqual({ echo: 0, fromGlobal: 0 });
    expect((await nodeTables(bed.inNode)).tables).not.toContain(`ip6 ${TABLE}`);

    const { list, file } = await shimConflist(bed, placement);
    const shim = runtime(bed, list);
    const result = await shim.add('shim-pod', `/run/netns/${target}`, 'eth0');
    const ip = (result.ips as Array<{ address: string }>)[0]!.address.split('/')[0]!;
    expect(ip.startsWith('fd00:10:240::')).toBe(true);
    expect(await ledgerRecords(bed.s.stateDir, 'probe6')).toEqual(['shim-pod:eth0.json']);
    expect(await nodeTables(bed.inNode)).toMatchObject({ ourRules: 3 });

    await settled(bed.node, target);
    const after = await ping(bed.inLb, ip);
    expect(after.stdout).toMatch(/2 packets transmitted, 2 received/);
    expect(after.exitCode).toBe(0);
    expect(await targetSeen()).toEqual({ echo: 2, fromGlobal: 2 });
    // The rewrite is node-wide: the pod attached without the shim now answers too.
    expect((await ping(bed.inLb, control.ip)).exitCode).toBe(0);

    const status = await cli(bed, ['status', '--conflist', file, '--json']);
    expect(status.exitCode, status.stderr).toBe(0);
    expect(status.json).toMatchObject({
      state: 'present',
      verdict: 'ok',
      matchesExpected: true,
      uplink: UPLINK,
      ipv6Addresses: 1,
      settingsFrom: file,
    });
    expect(status.json.counters.postrouting).toEqual({ packets: 4, bytes: 416 }); // two pods × two echo replies of 104 bytes

    await shim.del('shim-pod', `/run/netns/${target}`, 'eth0');
    expect(await ledgerRecords(bed.s.stateDir, 'probe6')).toEqual([]);
  });

  it('20 parallel ADDs leave one table with one copy of each rule; the CLI remove restores the original ruleset', async () => {
    await bed.inNode('nft', ['-f', '-'], {
      input: ['table inet unrelated {', '  chain input { type filter hook input priority 0; tcp dport 22 counter accept; }', '}'].join('\n'),
    });
    const original = (await bed.inNode('nft', ['list', 'ruleset'])).stdout;
    const { list, file } = await shimConflist(bed, placement);
    const shim = runtime(bed, list);
    const pods = await Promise.all(Array.from({ length: 20 }, () => bed.net.netns('pod')));

    const results = await Promise.all(pods.map((pod, i) => shim.add(`par-${i}`, `/run/netns/${pod}`, 'eth0')));
    expect(new Set(results.map((r) => (r.ips as Array<{ address: string }>)[0]!.address)).size).toBe(20);
    expect(await ledgerRecords(bed.s.stateDir, 'probe6')).toHaveLength(20);
    expect(await nodeTables(bed.inNode)).toEqual({ tables: ['inet unrelated', `ip6 ${TABLE}`], ourRules: 3 });
    const status = await cli(bed, ['status', '--conflist', file, '--json']);
    expect(status.json).toMatchObject({ verdict: 'ok', matchesExpected: true, ipv6Addresses: 20 });

    const removed = await cli(bed, ['remove', '--conflist', file]);
    expect(removed.exitCode, removed.stderr).toBe(0);
    expect(removed.stdout).toMatch(/removed table ip6 azureSLBProbe/);
    expect((await bed.inNode('nft', ['list', 'ruleset'])).stdout).toBe(original);
    // Now it is needed and missing: status says so with exit 1.
    const missing = await cli(bed, ['status', '--conflist', file, '--json']);
    expect(missing.exitCode).toBe(1);
    expect(missing.json).toMatchObject({ state: 'absent', verdict: 'absent', problem: true });
  });

  it('an IPv4-only pod never creates the table', async () => {
    const { list } = await shimConflist(bed, placement, { family: 4, mode: 'auto' });
    const shim = runtime(bed, list);
    const { ip } = await addPod(bed, shim, 'v4-pod');
    expect(ip).toMatch(/^10\.244\.7\./);
    expect(await ledgerRecords(bed.s.stateDir, 'probe6')).toEqual(['v4-pod:eth0.json']); // the shim did run
    expect((await nodeTables(bed.inNode)).tables).toEqual([]);
  });

  it('with a clsact BPF filter on the uplink, auto leaves probes to BPF; on installs regardless; off never', async () => {
    await bed.inNode('tc', ['qdisc', 'add', 'dev', UPLINK, 'clsact']);
    await bed.inNode('tc', ['filter', 'add', 'dev', UPLINK, 'ingress', ...(await bpfFilterArgs(bed.net))]);

    const auto = await shimConflist(bed, placement, { mode: 'auto' });
    await addPod(bed, runtime(bed, auto.list), 'bpf-auto');
    expect((await nodeTables(bed.inNode)).tables).toEqual([]);
    const handled = await cli(bed, ['status', '--conflist', auto.file, '--json']);
    expect(handled.exitCode, handled.stdout).toBe(0);
    expect(handled.json).toMatchObject({ state: 'handled-by-bpf', verdict: 'handled-by-bpf', tablePresent: false });

    const on = await shimConflist(bed, placement, { mode: 'on' });
    await addPod(bed, runtime(bed, on.list), 'bpf-on');
    expect(await nodeTables(bed.inNode)).toEqual({ tables: [`ip6 ${TABLE}`], ourRules: 3 });

    expect((await cli(bed, ['remove', '--conflist', on.file])).exitCode).toBe(0);
    expect((await nodeTables(bed.inNode)).tables).toEqual([]);
    await bed.inNode('tc', ['qdisc', 'del', 'dev', UPLINK, 'clsact']);

    // off: never, even with nothing else handling probes.
    const off = await shimConflist(bed, placement, { mode: 'off' });
    await addPod(bed, runtime(bed, off.list), 'no-bpf-off');
    expect((await nodeTables(bed.inNode)).tables).toEqual([]);
    expect(await ledgerRecords(bed.s.stateDir, 'probe6')).toEqual(['bpf-auto:eth0.json', 'bpf-on:eth0.json', 'no-bpf-off:eth0.json']);
  });

  it('a drifted table next to a BPF handler: ADD and status agree (auto leaves it to BPF; on repairs it and calls it drifted first)', async () => {
    await bed.inNode('tc', ['qdisc', 'add', 'dev', UPLINK, 'clsact']);
    await bed.inNode('tc', ['filter', 'add', 'dev', UPLINK, 'ingress', ...(await bpfFilterArgs(bed.net))]);
    // A table of ours that is not what the shim installs (no rules): drifted.
    await bed.inNode('nft', ['-f', '-'], {
      input: `table ip6 ${TABLE} { chain prerouting { type filter hook prerouting priority -300; policy accept; }; }`,
    });
    const listTable = async () => (await bed.inNode('nft', ['list', 'table', 'ip6', TABLE])).stdout;
    const drifted = await listTable();

    // auto: ipv6-hp-bpf owns probes here (and deletes the table): status says so, and ADD leaves the table alone.
    const auto = await shimConflist(bed, placement, { mode: 'auto' });
    const before = await cli(bed, ['status', '--conflist', auto.file, '--json']);
    expect(before.json).toMatchObject({ verdict: 'handled-by-bpf', problem: false });
    await addPod(bed, runtime(bed, auto.list), 'drift-auto');
    expect(await listTable()).toBe(drifted);
    const after = await cli(bed, ['status', '--conflist', auto.file, '--json']);
    expect(after.exitCode, after.stdout).toBe(0);
    expect(after.json).toMatchObject({ verdict: 'handled-by-bpf', problem: false, tablePresent: true, matchesExpected: false });

    // on: the table is kept regardless of BPF, so status calls it drifted (exit 1) and the next ADD repairs it.
    const on = await shimConflist(bed, placement, { mode: 'on', name: 'probe6on' });
    const onBefore = await cli(bed, ['status', '--conflist', on.file, '--json']);
    expect(onBefore.exitCode, onBefore.stdout).toBe(1);
    expect(onBefore.json).toMatchObject({ verdict: 'drifted', problem: true });
    await addPod(bed, runtime(bed, on.list), 'drift-on');
    expect(await nodeTables(bed.inNode)).toEqual({ tables: [`ip6 ${TABLE}`], ourRules: 3 });
    const onAfter = await cli(bed, ['status', '--conflist', on.file, '--json']);
    expect(onAfter.exitCode, onAfter.stdout).toBe(0);
    expect(onAfter.json).toMatchObject({ verdict: 'ok', matchesExpected: true });
  });
});

describe.skipIf(!root)('probe-rewrite CLI input', () => {
  const net = new TestNet();
  afterEach(() => net.cleanup());

  it('ensure --uplink with an interface that does not exist is refused (exit 2) and installs nothing', async () => {
    const ns = await net.netns('prup');
    const r = await execa('ip', ['netns', 'exec', ns, SHIM, 'probe-rewrite', 'ensure', '--uplink', 'nosuch0'], {
      reject: false,
      env: { CNI_COMMAND: '' },
    });
    expect(r.exitCode, r.stdout).toBe(2);
    expect(r.stderr).toContain('--uplink: uplink "nosuch0" is no interface here');
    expect((await runInNetns(ns)('nft', ['list', 'tables'])).stdout).not.toContain(TABLE);
  });

  it('status and remove --uplink with an interface that does not exist: exit 2 as the help promises, not 1 (issue 37)', async () => {
    const ns = await net.netns('prup');
    for (const action of ['status', 'remove']) {
      for (const json of [[], ['--json']]) {
        const r = await execa('ip', ['netns', 'exec', ns, SHIM, 'probe-rewrite', action, '--uplink', 'nosuch0', ...json], {
          reject: false,
          env: { CNI_COMMAND: '' },
        });
        expect(r.exitCode, `${action} ${json.join(' ')}: ${r.stdout}`).toBe(2);
        expect(r.stderr).toContain('--uplink: uplink "nosuch0" is no interface here');
      }
    }
    // An interface that is there: status answers (1: needed and missing, with no ledger known), never a usage error.
    const ok = await execa('ip', ['netns', 'exec', ns, SHIM, 'probe-rewrite', 'status', '--uplink', 'lo'], {
      reject: false,
      env: { CNI_COMMAND: '' },
    });
    expect(ok.exitCode, ok.stderr).not.toBe(2);
  });
});
