// What the agent logs once for a lasting condition (issue 37 part 9), and the series it creates at 0 as soon as a
// pass knows the network: a pass every interval must not repeat the same warning all day, and a counter born at
// its first increment gives increase() (the shipped alert) nothing for that first event. Real files for the
// network, ledger and cache; the node's tools are scripted (src/scripted/scripted-run.ts).
import { mkdir, mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentMetrics } from '../../src/agent/metrics.js';
import { reconcileOnce, type PassMemory, type ReconcileOptions } from '../../src/agent/reconcile.js';
import { scriptedRun } from '../../src/scripted/scripted-run.js';
import { Lasting } from '../../src/contract/lasting.js';
import { parseMetrics, seriesKey } from '../../src/metrics.js';

let dir: string | undefined;
afterEach(async () => dir && rm(dir, { recursive: true, force: true }));

function capture() {
  const lines: Record<string, any>[] = [];
  const log = pino(
    { level: 'debug', formatters: { level: (label: string) => ({ level: label }) } },
    { write: (l: string) => void lines.push(JSON.parse(l)) },
  );
  return { log, lines };
}

/** The node holds 10.0.0.5 on eth0; no routes; every other tool "not installed". */
const node = scriptedRun((file, args) => {
  if (file === 'ip' && args.join(' ') === '-j addr show')
    return JSON.stringify([{ ifname: 'eth0', address: '00:0d:3a:00:00:05', addr_info: [{ family: 'inet', local: '10.0.0.5', prefixlen: 24 }] }]);
  if (file === 'ip' && args.includes('route')) return '[]';
  if (file === 'ip' && args.includes('rule')) return '[]';
  return undefined;
});

async function world(): Promise<{ o: Omit<ReconcileOptions, 'signal'>; cache: string; lines: Record<string, any>[] }> {
  dir = await mkdtemp(join(tmpdir(), 'agent-lasting-'));
  const confDir = join(dir, 'net.d');
  await mkdir(confDir);
  const list = {
    cniVersion: '1.0.0',
    name: 'net',
    plugins: [
      { type: 'ptp', ipam: { type: 'host-local', ranges: [[{ subnet: '10.0.0.0/24' }]] } },
      { type: 'ipam-shim', stateDir: join(dir, 'state'), logFile: join(dir, 'shim.log'), ipv6ProbeRewrite: 'off' },
    ],
  };
  await writeFile(join(confDir, '10-net.conflist'), JSON.stringify(list));
  const { log, lines } = capture();
  const o = {
    network: { confDir, network: 'net', cniPath: '/nonexistent' },
    env: {},
    run: node,
    log,
    metrics: new AgentMetrics(),
    gc: { mode: 'report' as const, cacheDir: join(dir, 'cache'), graceMs: 0, allowEmptyCache: false },
  };
  return { o, cache: join(dir, 'cache', 'results'), lines };
}

/** A cache entry of a pod the shim never saw, naming `ip`. */
async function cacheEntry(cache: string, id: string, ip: string): Promise<string> {
  await mkdir(cache, { recursive: true });
  const path = join(cache, `net-${id}-eth0`);
  const result = { cniVersion: '1.0.0', ips: [{ address: `${ip}/24` }] };
  await writeFile(path, JSON.stringify({ kind: 'cniCacheV1', containerId: id, ifName: 'eth0', networkName: 'net', result }));
  return path;
}

const passes = async (o: Omit<ReconcileOptions, 'signal'>, memory: PassMemory, n: number) => {
  for (let i = 0; i < n; i++) await reconcileOnce({ ...o, memory, signal: new AbortController().signal });
};
const memory0 = (): PassMemory => ({});

/** A pod's attached record in the ledger of `net` (format v1, as ADD writes it). */
async function podRecord(): Promise<void> {
  const records = join(dir!, 'state', 'net', 'records');
  await mkdir(records, { recursive: true, mode: 0o700 });
  const now = new Date().toISOString();
  const record = { v: 1, containerID: 'pod-a', ifname: 'eth0', network: 'net', owner: 'pod', state: 'attached', placement: 'chained' };
  await writeFile(
    join(records, 'pod-a:eth0.json'),
    JSON.stringify({ ...record, ips: ['10.0.0.9/24'], netns: '/run/netns/x', createdAt: now, updatedAt: now }),
  );
}
const said = (lines: Record<string, any>[], re: RegExp) => lines.filter((l) => re.test(String(l.msg)));

describe('lasting conditions: logged once when they start, once when they end', () => {
  it('a fresh node (no cache, no pod recorded): one info line, no warning (issue 43, item 9)', async () => {
    const { o, lines } = await world();
    await passes(o, memory0(), 3);
    expect(said(lines, /result cache/).map((l) => [l.level, l.msg])).toEqual([
      ['info', 'pods: no runtime result cache yet and no pod recorded (a node before its first pod): looked for again every pass'],
    ]);
  });

  it("the runtime's result cache out of sight while pods are recorded: one warning over three passes, one line when it is in sight again", async () => {
    const { o, cache, lines } = await world();
    await podRecord();
    const memory: PassMemory = {};
    await passes(o, memory, 3);
    expect(said(lines, /result cache is out of sight/).map((l) => l.level)).toEqual(['warn']);
    await mkdir(cache, { recursive: true });
    await passes(o, memory, 2);
    expect(said(lines, /result cache is in sight again/).map((l) => l.level)).toEqual(['info']);
    expect(said(lines, /result cache is out of sight/)).toHaveLength(1);
  });

  it("a rogue cache entry naming the node's address: the residue step's refusal is logged once while it lasts, once when it goes", async () => {
    const { o, cache, lines } = await world();
    const entry = await cacheEntry(cache, 'rogue', '10.0.0.5');
    const memory: PassMemory = {};
    await passes(o, memory, 3);
    const refused = said(lines, /cannot be a pod's of this network are not cleaned/);
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ level: 'warn', count: 1, refused: [{ ip: '10.0.0.5', kind: 'node-address' }] });
    // A second rogue entry is new: logged, alone.
    await cacheEntry(cache, 'rogue2', '10.0.0.5');
    await passes(o, memory, 2);
    expect(said(lines, /cannot be a pod's of this network are not cleaned/).map((l) => l.count)).toEqual([1, 1]);
    await unlink(entry);
    await passes(o, memory, 2);
    expect(said(lines, /whose addresses could not be a pod's are gone/)).toMatchObject([{ level: 'info', count: 1, gone: [{ ip: '10.0.0.5' }] }]);
  });

  it('Lasting: started and ended per key', () => {
    const l = new Lasting<{ k: string }>((x) => x.k);
    expect(l.update([{ k: 'a' }, { k: 'b' }]).started).toEqual([{ k: 'a' }, { k: 'b' }]);
    const next = l.update([{ k: 'b' }, { k: 'c' }]);
    expect(next.started).toEqual([{ k: 'c' }]);
    expect(next.ended).toMatchObject([{ k: 'a', since: expect.any(String) }]);
    expect(l.current()).toEqual([{ k: 'b' }, { k: 'c' }]);
  });
});

describe('series created at 0 as soon as a pass knows the network', () => {
  it('ipam_shim_agent_residue_removed_total{network,kind} for each kind exists at 0 after the first pass', async () => {
    const { o } = await world();
    const before = parseMetrics((await o.metrics.render()).body);
    expect(before.get(seriesKey('ipam_shim_agent_residue_removed_total', { network: 'net', kind: 'ebtables' }))).toBeUndefined();
    await passes(o, {}, 1);
    const after = parseMetrics((await o.metrics.render()).body);
    for (const kind of ['ebtables', 'neigh'])
      expect(after.get(seriesKey('ipam_shim_agent_residue_removed_total', { network: 'net', kind }))?.value, kind).toBe(0);
  });
});
