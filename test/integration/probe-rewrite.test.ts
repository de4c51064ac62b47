// src/probe-rewrite/ over effects/probe-rewrite.ts for real, on the topology verified in field notes §"Reproductions" (IPv6 probe):
//   netns lb (fe80::1234:5678:9abc only) ── veth ── netns node6 (fe80::1, forwarding) ── ptp ── pod netns
// The load balancer probes from its link-local address; node6 must not forward that source, so nothing reaches
// the pod until the table rewrites it.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runInNetns, type Run } from '../../src/effects/exec.js';
import {
  ensureProbeRewrite,
  isProbeHandledByBpf,
  listProbeTable,
  probeRewriteStatus,
  removeProbeRewrite,
  tableState,
} from '../../src/probe-rewrite/node.js';
import type { ProbeRewriteOptions } from '../../src/probe-rewrite/ruleset.js';
import { parseProbeTable, probeRewriteRuleset, probeTableMatches } from '../../src/probe-rewrite/ruleset.js';
import { rootOrSkip, TestNet, uid } from '../support/net/netns.js';
import { bpfFilterArgs, ping, probeTopology as nodeAndLb, UPLINK, watchPodInput } from '../support/net/probe-topology.js';

const root = rootOrSkip();

/** The table's state as ADD judges it (one nft listing, then tableState): what decide() acts on. */
const tableNow = async (run: Run, opts: ProbeRewriteOptions) => tableState(await listProbeTable(run), opts);
const PLUGIN_DIR = process.env.CNI_PLUGIN_DIR ?? '/usr/lib/cni';
const POD_RANGE = 'fd00:10:240::/64';

/** Attaches a pod netns to node6 with the reference ptp plugin + host-local, exactly as a runtime would. */
async function attachPod(net: TestNet, node: string): Promise<{ pod: string; podIP: string }> {
  const pod = await net.netns('pod');
  const dataDir = await mkdtemp(join(tmpdir(), 'probe6-hl-'));
  const conf = JSON.stringify({
    cniVersion: '1.0.0',
    name: 'probe6',
    type: 'ptp',
    ipam: { type: 'host-local', ranges: [[{ subnet: POD_RANGE }]], routes: [{ dst: '::/0' }], dataDir },
  });
  const env = (command: string) => ({
    CNI_COMMAND: command,
    CNI_CONTAINERID: `probe6-${uid()}`,
    CNI_NETNS: `/run/netns/${pod}`,
    CNI_IFNAME: 'eth0',
    CNI_PATH: PLUGIN_DIR,
  });
  const addEnv = env('ADD');
  const ptp = (e: Record<string, string>) => runInNetns(node)(join(PLUGIN_DIR, 'ptp'), [], { input: conf, env: e });
  const added = await ptp(addEnv);
  net.defer(async () => {
    await ptp({ ...addEnv, CNI_COMMAND: 'DEL' }).catch(() => undefined);
    await rm(dataDir, { recursive: true, force: true });
  });
  const address = (JSON.parse(added.stdout) as { ips: Array<{ address: string }> }).ips[0]?.address;
  if (!address) throw new Error(`ptp returned no IP: ${added.stdout}`);
  return { pod, podIP: address.split('/')[0]! };
}

describe.skipIf(!root)('probe rewrite on the verified LB → node → pod topology', () => {
  let net: TestNet;
  beforeEach(() => {
    net = new TestNet();
  });
  afterEach(() => net.cleanup());

  it('without the table the pod sees nothing; with it probes arrive from the global address and replies return', async () => {
    const { node, inLb, inNode } = await nodeAndLb(net);
    const { pod, podIP } = await attachPod(net, node);
    const podCounters = await watchPodInput(runInNetns(pod));
    await inLb('ip', ['-6', 'route', 'add', POD_RANGE, 'via', 'fe80::1', 'dev', UPLINK]);

    const before = await ping(inLb, podIP);
    expect(before.exitCode).not.toBe(0);
    expect(before.stdout).toMatch(/Beyond scope of source address/);
    expect(await podCounters()).toEqual({ echo: 0, fromGlobal: 0 });
    await expect(probeRewriteStatus(inNode)).resolves.toMatchObject({ state: 'absent', uplink: UPLINK, tablePresent: false });
    await expect(tableNow(inNode, { uplink: UPLINK })).resolves.toBe('absent');

    await expect(ensureProbeRewrite(inNode, { uplink: UPLINK })).resolves.toEqual({ available: true });
    const after = await ping(inLb, podIP);
    expect(after.stdout).toMatch(/2 packets transmitted, 2 received/);
    expect(after.exitCode).toBe(0);
    const seen = await podCounters();
    expect(seen.fromGlobal).toBe(2);
    expect(seen.echo).toBe(2);

    const status = await probeRewriteStatus(inNode);
    expect(status).toMatchObject({ available: true, state: 'present', uplink: UPLINK, matchesExpected: true });
    if (!status.available) throw new Error('unreachable');
    expect(status.counters.prerouting.packets).toBeGreaterThanOrEqual(2); // lb's MLD/RS share the source
    expect(status.counters.postrouting).toEqual({ packets: 2, bytes: 208 }); // the two echo replies, 104 bytes each
    await expect(tableNow(inNode, { uplink: UPLINK })).resolves.toBe('matching');
  });
});

describe.skipIf(!root)('table ownership', () => {
  let net: TestNet;
  let inNode: Run;
  beforeEach(async () => {
    net = new TestNet();
    ({ inNode } = await nodeAndLb(net));
  });
  afterEach(() => net.cleanup());

  it('20 concurrent ensures leave one table with one copy of each rule; the cheap check is then one fast call', async () => {
    const t0 = performance.now();
    const results = await Promise.all(Array.from({ length: 20 }, () => ensureProbeRewrite(inNode, { uplink: UPLINK })));
    const concurrentMs = performance.now() - t0;
    expect(results.every((r) => r.available)).toBe(true);

    const ruleset = JSON.parse((await inNode('nft', ['-j', 'list', 'ruleset'])).stdout) as { nftables: Array<Record<string, any>> };
    expect(ruleset.nftables.filter((o) => o.table).map((o) => `${o.table.family} ${o.table.name}`)).toEqual(['ip6 azureSLBProbe']);
    expect(ruleset.nftables.filter((o) => o.rule)).toHaveLength(3);
    const table = parseProbeTable((await inNode('nft', ['-j', 'list', 'table', 'ip6', 'azureSLBProbe'])).stdout);
    expect(probeTableMatches(table, { uplink: UPLINK })).toBe(true);

    const samples: number[] = [];
    for (let i = 0; i < 20; i++) {
      const s = performance.now();
      await expect(tableNow(inNode, { uplink: UPLINK })).resolves.toBe('matching');
      samples.push(performance.now() - s);
    }
    const nsExecOnly: number[] = [];
    for (let i = 0; i < 20; i++) {
      const s = performance.now();
      await inNode('true', []);
      nsExecOnly.push(performance.now() - s);
    }
    console.log(
      `probe-rewrite timings: 20 concurrent ensures ${concurrentMs.toFixed(0)} ms; table listing median ${median(samples).toFixed(1)} ms ` +
        `(of which ip-netns-exec overhead median ${median(nsExecOnly).toFixed(1)} ms)`,
    );
  });

  it('remove restores the ruleset byte for byte, sparing an unrelated table (same name, other family included)', async () => {
    await inNode('nft', ['-f', '-'], {
      input: [
        'table inet unrelated {',
        '  chain input { type filter hook input priority 0; tcp dport 22 counter accept; }',
        '}',
        'table ip azureSLBProbe { chain c { }; }',
      ].join('\n'),
    });
    const listRuleset = async () => (await inNode('nft', ['list', 'ruleset'])).stdout;
    const original = await listRuleset();

    await ensureProbeRewrite(inNode, { uplink: UPLINK });
    expect(await listRuleset()).not.toBe(original);
    await expect(removeProbeRewrite(inNode)).resolves.toEqual({ available: true });
    expect(await listRuleset()).toBe(original);
    await expect(removeProbeRewrite(inNode)).resolves.toEqual({ available: true }); // absent = success
    expect(await listRuleset()).toBe(original);
  });

  it('ensure converges on a drifted table (foreign chain priority, stray set) where AgentBaker’s flush would fail', async () => {
    await inNode('nft', ['-f', '-'], {
      input: 'table ip6 azureSLBProbe { set stray { type ipv6_addr; }; chain prerouting { type filter hook prerouting priority -200; }; }',
    });
    await expect(tableNow(inNode, { uplink: UPLINK })).resolves.toBe('drifted');
    const agentBakerForm = probeRewriteRuleset({ uplink: UPLINK }).replace('delete table', 'flush table');
    const flushed = await inNode('nft', ['-f', '-'], { input: agentBakerForm, check: false });
    expect(flushed.stderr).toMatch(/Operation not supported/); // a hooked chain cannot change its priority
    await ensureProbeRewrite(inNode, { uplink: UPLINK });
    await expect(tableNow(inNode, { uplink: UPLINK })).resolves.toBe('matching');
    // A different uplink is drift too, and ensure moves the table to it.
    await expect(tableNow(inNode, { uplink: 'eth1' })).resolves.toBe('drifted');
  });

  it('sees a clsact qdisc with a BPF ingress filter as handled by BPF', async () => {
    expect(await isProbeHandledByBpf(inNode, UPLINK)).toBe(false);
    expect(await isProbeHandledByBpf(inNode, 'no-such-dev')).toBe(false);
    await inNode('tc', ['qdisc', 'add', 'dev', UPLINK, 'clsact']);
    expect(await isProbeHandledByBpf(inNode, UPLINK)).toBe(false); // clsact alone handles nothing

    await inNode('tc', ['filter', 'add', 'dev', UPLINK, 'ingress', ...(await bpfFilterArgs(net))]);
    expect(await isProbeHandledByBpf(inNode, UPLINK)).toBe(true);
    await ensureProbeRewrite(inNode, { uplink: UPLINK });
    await expect(probeRewriteStatus(inNode)).resolves.toMatchObject({ state: 'handled-by-bpf', uplink: UPLINK, tablePresent: true });
  });
});

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}
