// The built agent's HTTP ports as the DaemonSet sets them, under the floods of issue 45 (items 4 and 5): any pod
// reaches the metrics port on the node's address, and the kubelet restarts an agent whose liveness probe fails.
// The agent (dist/ipam-shim, `--no-install`, no network: only its HTTP side matters here) runs in a netns
// standing for an IPv6 node (its address fd00:45::4 on lo, `$(NODE_IP)`), with the DaemonSet's --listen and
// --probe-listen; the kubelet's probes go where the DaemonSet's livenessProbe sends them (httpGet host, default
// the pod IP, which is the node's; the port by name or number). Floods and probes are processes of their own in
// that netns (test/support/net/http-flood.ts), from addresses added to its lo.
import { execa, type ResultPromise } from 'execa';
import { readdirSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseListen } from '../../src/agent/http.js';
import { commandLine, daemonSet, kustomization } from '../support/deploy/daemonset.js';
import { FLOOD, PROBES } from '../support/net/http-flood.js';
import { inNs, rootOrSkip, TestNet } from '../support/net/netns.js';
import { followAgent, type RunningAgent } from '../support/shim/agent.js';
import { ROOT, scratch } from '../support/shim/cni.js';
import { waitFor } from '../support/wait.js';

const AGENT = join(ROOT, 'dist/ipam-shim');
const enabled = rootOrSkip();
/** The node's address: `$(NODE_IP)` (status.hostIP) of an IPv6 node. */
const NODE_IP = 'fd00:45::4';
/** 80 addresses of one /64: a pod holding a prefix (issue 45 measured 0 of 24 probes answered with them). */
const SIXTY_FOUR = Array.from({ length: 80 }, (_, i) => `fd00:45:0:1::${(0x100 + i).toString(16)}`);
/** Prometheus, from another /64. */
const PROMETHEUS = 'fd00:45:0:2::9';
/** Four pods, each in a /64 of its own. */
const PODS = ['fd00:45:0:3::1', 'fd00:45:0:4::1', 'fd00:45:0:5::1', 'fd00:45:0:6::1'];
/** An IPv4 node's address, 72 pods' addresses (one each: the trial's flood), and Prometheus' pod's. */
const NODE_IP4 = '10.45.0.4';
const SEVENTY_TWO = Array.from({ length: 72 }, (_, i) => `10.45.1.${i + 1}`);
const PROMETHEUS4 = '10.45.2.9';
/** deploy/daemonset.yaml's memory limit for the agent container. */
const DAEMONSET_LIMIT_MIB = 384;

/** Where the DaemonSet has the agent listen, and where its kubelet sends the liveness probe. */
async function deployed(): Promise<{ listenArgs: string[]; env: Record<string, string>; liveness: { host: string; port: number; path: string } }> {
  const { container } = await daemonSet();
  const { configMaps } = await kustomization();
  const argv = commandLine(
    container,
    configMaps.map((c) => ({ metadata: { name: c.name }, data: c.data })),
    NODE_IP,
  );
  const listenArgs: string[] = [];
  argv.forEach((a, i) => {
    if (a === '--listen' || a === '--probe-listen') listenArgs.push(a, argv[i + 1]!);
  });
  const get = container.livenessProbe.httpGet;
  const ports = new Map<string, number>((container.ports ?? []).map((p: { name: string; containerPort: number }) => [p.name, p.containerPort]));
  const port = typeof get.port === 'number' ? get.port : ports.get(get.port)!;
  // NODE_OPTIONS (the heap's sizes) as the container has it: the memory measured is the DaemonSet's.
  const env = Object.fromEntries(
    (container.env as Array<{ name: string; value?: string }>).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]),
  );
  return { listenArgs, env, liveness: { host: get.host ?? NODE_IP, port, path: get.path } };
}

/** The agent's peak resident memory (VmHWM), MiB: `ip netns exec` execs the agent, so the child's pid is the agent's. */
const peakRssMiB = async (a: RunningAgent): Promise<number> =>
  Number(/^VmHWM:\s+(\d+) kB/m.exec(await readFile(`/proc/${a.proc.pid}/status`, 'utf8'))![1]) / 1024;

describe.skipIf(!enabled)("the agent's ports as the DaemonSet sets them, under floods (issue 45)", () => {
  const net = new TestNet();
  const procs: ResultPromise[] = [];
  afterEach(async () => {
    for (const p of procs.splice(0)) p.kill('SIGKILL');
    await net.cleanup();
  });

  /** The node netns with the node's, the flood's and Prometheus' addresses on lo, and the agent started in it. */
  async function node(extra: string[], o: { listen?: string } = {}): Promise<{ ns: string; agent: RunningAgent }> {
    const ns = await net.netns('node');
    const s = await scratch();
    net.defer(() => s.cleanup());
    const batch = [`${NODE_IP}/128`, `${PROMETHEUS}/128`, ...extra.map((a) => `${a}/${a.includes(':') ? 128 : 32}`)].map(
      (a) => `addr add ${a} dev lo${a.includes(':') ? ' nodad' : ''}`,
    );
    await inNs(ns, 'ip', ['-batch', '-'], { input: `${batch.join('\n')}\n` });
    const conf = join(s.dir, 'net.d');
    await mkdir(conf);
    const { listenArgs, env } = await deployed();
    if (o.listen) listenArgs[listenArgs.indexOf('--listen') + 1] = o.listen;
    const proc = execa(
      'ip',
      [
        'netns',
        'exec',
        ns,
        AGENT,
        'agent',
        '--no-install',
        '--conf-dir',
        conf,
        '--cache-dir',
        join(s.dir, 'cache'),
        '--interval',
        '3600',
        ...listenArgs,
      ],
      { reject: false, buffer: false, env },
    );
    procs.push(proc);
    const agent = followAgent(proc);
    await waitFor('the agent to listen', () => agent.lines().some((l) => l.msg === 'agent started'), 20_000);
    return { ns, agent };
  }

  const flood = (ns: string, host: string, port: number, sources: string[], perSource: number, mode: string) => {
    const p = execa('ip', ['netns', 'exec', ns, process.execPath, '-e', FLOOD, host, String(port), sources.join(','), String(perSource), mode], {
      reject: false,
      buffer: false,
    });
    procs.push(p);
    return p;
  };

  /** 24 kubelet-like probes, one every 250 ms (1 s timeout each), from `ns`; their statuses. */
  const probes = async (ns: string, t: { host: string; port: number; path: string }): Promise<Array<number | string>> => {
    const r = await inNs(ns, process.execPath, ['-e', PROBES, t.host, String(t.port), t.path, '24', '250']);
    return JSON.parse(r.stdout) as Array<number | string>;
  };

  it('80 addresses of one /64 holding idle connections: every liveness probe and every scrape from another /64 answered', {
    timeout: 120_000,
  }, async () => {
    const { liveness } = await deployed();
    const { ns } = await node(SIXTY_FOUR);
    const metricsPort = parseListen((await deployed()).listenArgs[1]!).port;
    // Two idle connections from each address (160, against 64 slots), each reconnecting once closed.
    flood(ns, NODE_IP, metricsPort, SIXTY_FOUR, 2, 'idle');
    await new Promise((r) => setTimeout(r, 1_000));
    // Prometheus: a scrape from its pod's address (another /64) to the metrics port.
    const scrapeScript = PROBES.replace('agent: false,', 'agent: false, localAddress: process.argv[6],');
    const [probed, scraped] = await Promise.all([
      probes(ns, liveness),
      inNs(ns, process.execPath, ['-e', scrapeScript, NODE_IP, String(metricsPort), '/metrics', '24', '250', PROMETHEUS]).then(
        (r) => JSON.parse(r.stdout) as Array<number | string>,
      ),
    ]);
    console.log(`/64 flood: liveness ${JSON.stringify(probed)}; scrapes ${JSON.stringify(scraped)}`);
    expect(
      probed.filter((r) => r !== 200),
      'liveness probes not answered 200',
    ).toEqual([]);
    expect(
      scraped.filter((r) => r !== 200),
      'scrapes not answered 200',
    ).toEqual([]);
  });

  it('72 IPv4 addresses holding one idle connection each: every scrape from a 73rd answered, no descriptor kept after', {
    timeout: 120_000,
  }, async () => {
    const metricsPort = parseListen((await deployed()).listenArgs[1]!).port;
    const { ns, agent } = await node([NODE_IP4, ...SEVENTY_TWO, PROMETHEUS4], { listen: `${NODE_IP4}:${metricsPort}` });
    const fds = () => readdirSync(`/proc/${agent.proc.pid}/fd`).length;
    const baseline = fds();
    // One idle connection from each address (72, against 64 slots), each reconnecting once closed.
    const f = flood(ns, NODE_IP4, metricsPort, SEVENTY_TWO, 1, 'idle');
    let made = 0;
    f.stdout!.on('data', (d: Buffer) => {
      made = Number(d.toString().trim().split('\n').at(-1));
    });
    // The flood holds the port: at least 64 of its connections made (the flood prints its count every 500 ms).
    await waitFor('the flood to hold the port', () => made >= 64 && fds() >= baseline + 60, 30_000);
    const scrapeScript = PROBES.replace('agent: false,', 'agent: false, localAddress: process.argv[6],');
    const scraped = JSON.parse(
      (await inNs(ns, process.execPath, ['-e', scrapeScript, NODE_IP4, String(metricsPort), '/metrics', '24', '250', PROMETHEUS4])).stdout,
    ) as Array<number | string>;
    const during = fds();
    f.kill('SIGKILL');
    await f;
    console.log(`72 IPv4 sources: scrapes ${JSON.stringify(scraped)}; flood connections ${made}; fds ${baseline} → ${during}`);
    // Before (a newcomer had to be outweighed by two connections of one source): 0 of 24 answered.
    expect(
      scraped.filter((r) => r !== 200),
      'scrapes not answered 200',
    ).toEqual([]);
    // Nothing kept once the flood has gone: the agent's descriptors back to what they were.
    await waitFor(`descriptors back to ${baseline}`, () => fds() <= baseline, 30_000);
    console.log(`72 IPv4 sources: fds after the flood ${fds()}`);
  });

  it.each([
    ['one address within its share (16 connections)', PODS.slice(0, 1)],
    ['4 addresses (64 connections)', PODS],
  ])(
    '8,000 pipelined GET /metrics a connection, never read, from %s: the agent stays small, every liveness probe answered',
    { timeout: 120_000 },
    async (_name, sources) => {
      const { liveness, listenArgs } = await deployed();
      const { ns, agent } = await node(sources);
      const before = await peakRssMiB(agent);
      const metricsPort = parseListen(listenArgs[1]!).port;
      flood(ns, NODE_IP, metricsPort, sources, 16, 'pipeline');
      const probed = await probes(ns, liveness);
      const peak = await peakRssMiB(agent);
      console.log(`pipelined flood from ${sources.length}: liveness ${JSON.stringify(probed)}; VmHWM ${before.toFixed(0)} → ${peak.toFixed(0)} MiB`);
      expect(
        probed.filter((r) => r !== 200),
        'liveness probes not answered 200',
      ).toEqual([]);
      // Measured before the change (issue 45): 333 MiB with one connection, 753 MiB with 16.
      expect(peak - before, `VmHWM ${before.toFixed(0)} → ${peak.toFixed(0)} MiB`).toBeLessThan(64);
      expect(peak).toBeLessThan(DAEMONSET_LIMIT_MIB / 2);
    },
  );
});
