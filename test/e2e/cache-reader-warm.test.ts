// The node agent's warm cache reader (issue 45: the 5,000-pod pass): one long-lived reader child kept between
// passes, so its code stays compiled, instead of a fresh executable every pass. The built single executable, its
// children counted in /proc. Before the warm reader, no reader lived between passes (each pass started and reaped
// its own): the first case failed on "one reader between passes" (0 readers).
import { execa, type ResultPromise } from 'execa';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PLUGIN_DIR, scratch, SHIM } from '../support/shim/cni.js';
import { rootOrSkip, TestNet } from '../support/net/netns.js';
import { waitFor } from '../support/wait.js';
import { agentArgs, followAgent, onePass, type RunningAgent } from '../support/shim/agent.js';

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

  async function startAgent(): Promise<RunningAgent> {
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
    const proc: ResultPromise = execa('ip', ['netns', 'exec', node, SHIM, ...agentArgs(SHIM, n), '--interval', '3600', '--no-install'], {
      reject: false,
      buffer: false,
    });
    net.defer(async () => {
      proc.kill('SIGKILL');
      await proc;
    });
    const a = followAgent(proc);
    await waitFor('the first pass', () => a.passes().length >= 1, 30_000);
    return a;
  }

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
