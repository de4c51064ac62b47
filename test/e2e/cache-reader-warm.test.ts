// The node agent's warm cache reader (issue 45: the 5,000-pod pass): one long-lived reader child kept between
// passes, so its code stays compiled, instead of a fresh executable every pass. The built single executable, its
// children counted in /proc. Before the warm reader, no reader lived between passes (each pass started and reaped
// its own): the first case failed on "one reader between passes" (0 readers). A reader that answers with garbage or
// dies halfway through an answer is made so by Node's preload in its environment (test/support/misbehaving-reader.ts;
// nothing in the shim): that pass could not look and keeps a releasable attachment, which the next pass, with a
// fresh reader, releases.
import { execa, type ResultPromise } from 'execa';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PLUGIN_DIR, scratch, SHIM } from '../support/shim/cni.js';
import { rootOrSkip, TestNet } from '../support/net/netns.js';
import { waitFor } from '../support/wait.js';
import { agentArgs, followAgent, onePass, type RunningAgent } from '../support/shim/agent.js';
import { Ledger } from '../../src/effects/ledger.js';
import { podRecord } from '../support/doubles/ledger-record.js';
import { misbehavingReader } from '../support/misbehaving-reader.js';

const enabled = rootOrSkip();

/** The cache readers among `pid`'s children (the agent's, through /proc/<pid>/task/<tid>/children). */
function readers(pid: number): number[] {
  const children = readdirSync(`/proc/${pid}/task`).flatMap((t) =>
    readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number),
  );
  return children.filter((c) => {
    try {
      return readFileSync(`/proc/${c}/cmdline`, 'utf8').split('\0').includes('__read-runtime-cache');
    } catch {
      return false; // exited meanwhile
    }
  });
}

/** A pass read the cache (gc and pods ok); false: it said it could not look. */
const readIt = (pass: Record<string, any>) => pass.steps.gc === 'ok' && pass.steps.pods === 'ok';

describe.skipIf(!enabled)('the agent keeps one warm cache reader between passes', () => {
  const net = new TestNet();
  afterEach(() => net.cleanup());

  /** The agent over a cache holding one pod (`apply`: with `--gc apply`, no grace), its ledger. */
  async function startAgent(o: { apply?: boolean; env?: Record<string, string> } = {}): Promise<RunningAgent & { ledger: Ledger }> {
    const s = await scratch();
    net.defer(() => s.cleanup());
    const node = await net.netns('node');
    const confDir = join(s.dir, 'net.d');
    await mkdir(confDir);
    const network = 'warm';
    const list = {
      cniVersion: '1.0.0',
      name: network,
      plugins: [
        { type: 'ptp', ipam: { type: 'host-local', ranges: [[{ subnet: '10.242.0.0/24' }]], dataDir: s.dataDir } },
        { type: 'ipam-shim', stateDir: s.stateDir, logFile: s.logFile },
      ],
    };
    await writeFile(join(confDir, '10-warm.conflist'), JSON.stringify(list));
    const ledger = await new Ledger(s.stateDir, network).open();
    const cacheDir = join(s.dir, 'cache');
    await mkdir(join(cacheDir, 'results'), { recursive: true });
    const entry = {
      kind: 'cniCacheV1',
      containerId: 'c1',
      ifName: 'eth0',
      networkName: network,
      cniArgs: [
        ['K8S_POD_NAMESPACE', 'ns'],
        ['K8S_POD_NAME', 'p1'],
      ],
      result: { cniVersion: '1.0.0', ips: [{ address: '10.242.0.5/24' }] },
    };
    await writeFile(join(cacheDir, 'results', `${network}-c1-eth0`), JSON.stringify(entry));
    const n = { network, confDir, cniPath: PLUGIN_DIR, cacheDir, binDir: join(s.dir, 'bin') };
    const proc: ResultPromise = execa(
      'ip',
      [
        'netns',
        'exec',
        node,
        SHIM,
        ...agentArgs(SHIM, n, o.apply ? { graceSeconds: 0 } : {}),
        '--interval',
        '3600',
        '--no-install',
        ...(o.apply ? ['--gc', 'apply'] : []),
      ],
      {
        reject: false,
        buffer: false,
        ...(o.env ? { env: o.env } : {}),
      },
    );
    net.defer(async () => {
      proc.kill('SIGKILL');
      await proc;
    });
    const a = followAgent(proc);
    await waitFor('the first pass', () => a.passes().length >= 1, 30_000);
    return { ...a, ledger };
  }

  it.each([
    ['garbage (not one JSON line)', 'garbage', /it wrote something that is not an answer/],
    ['half an answer, then it dies (kill -9)', 'half', /its reader failed \(killed by SIGKILL/],
  ])(
    'a reader that answers with %s: that pass could not look (nothing released), a fresh reader, the next pass reads',
    { timeout: 90_000 },
    async (_name, how, said) => {
      const tmp = await scratch();
      net.defer(() => tmp.cleanup());
      const bad = await misbehavingReader(tmp.dir);
      const a = await startAgent({ apply: true, env: bad.env });
      const pid = a.proc.pid!;
      // A pod attachment long dead by every proof but the cache's (no netns, a day old): a pass that reads the
      // cache releases it; one that could not look must keep it.
      await a.ledger.put(podRecord('pod-gone', '10.242.0.9', new Date(Date.now() - 86_400_000).toISOString()));
      const gone = { containerID: 'pod-gone', ifname: 'eth0' };
      const [old] = readers(pid);
      expect(old).toBeDefined();
      // The next answer of this very reader: garbage, or half of it and then the reader dies.
      await bad.arm(how as 'garbage' | 'half');
      const blind = await onePass(a);
      expect(blind, JSON.stringify(blind)).toMatchObject({ steps: { gc: 'error', pods: 'error' }, released: 0 });
      expect(a.text()).toMatch(said);
      expect(a.text()).not.toMatch(/holds no entry/);
      expect(await a.ledger.get(gone), 'kept by the pass that could not look').toBeDefined();
      // Dropped: killed with its group (or dead already), none left behind.
      await waitFor('the old reader gone', () => !existsSync(`/proc/${old}`), 10_000);
      // The next pass starts a fresh reader and reads.
      const next = await onePass(a);
      expect(readIt(next), JSON.stringify(next)).toBe(true);
      expect(next.released, 'released by the pass that read the cache').toBe(1);
      expect(await a.ledger.get(gone)).toBeUndefined();
      const now = readers(pid);
      expect(now).toHaveLength(1);
      expect(now[0]).not.toBe(old);
      a.proc.kill('SIGTERM');
      expect((await a.proc).exitCode).toBe(0);
    },
  );

  it('one reader between passes, the same one each pass, and none left after SIGTERM', { timeout: 60_000 }, async () => {
    const a = await startAgent();
    const pid = a.proc.pid!;
    expect(readIt(a.passes()[0]!), JSON.stringify(a.passes()[0])).toBe(true);
    const first = readers(pid);
    expect(first, 'one reader between passes').toHaveLength(1);
    for (let i = 0; i < 3; i++) {
      expect(readIt(await onePass(a))).toBe(true);
      expect(readers(pid), `after pass ${i + 2}: the same reader`).toEqual(first);
    }
    a.proc.kill('SIGTERM');
    expect((await a.proc).exitCode).toBe(0);
    await waitFor('the reader gone', () => !existsSync(`/proc/${first[0]}`), 5_000);
  });

  it('a reader killed from outside (kill -9) is replaced: could not look at most once', { timeout: 60_000 }, async () => {
    const a = await startAgent();
    const pid = a.proc.pid!;
    const [old] = readers(pid);
    expect(old).toBeDefined();
    process.kill(old!, 'SIGKILL');
    await waitFor('the killed reader reaped', () => !readers(pid).includes(old!), 5_000);
    const passes = [await onePass(a), await onePass(a), await onePass(a)];
    expect(passes.filter((p) => !readIt(p)).length, JSON.stringify(passes.map((p) => p.steps))).toBeLessThanOrEqual(1);
    expect(readIt(passes.at(-1)!)).toBe(true);
    const now = readers(pid);
    expect(now).toHaveLength(1);
    expect(now[0]).not.toBe(old);
    a.proc.kill('SIGTERM');
    expect((await a.proc).exitCode).toBe(0);
    await waitFor('the reader gone', () => !existsSync(`/proc/${now[0]}`), 5_000);
  });
});
