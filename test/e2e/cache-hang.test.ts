// The runtime's result cache on a file system that stops answering (issue 45 finding 3): a real FUSE mount whose
// server takes every request and never replies (test/support/hung-fuse.ts), under the agent's --cache-dir; and one
// that answers everything but READ (the listing names regular files, their content never comes). Before,
// the cache was read synchronously in the agent's own thread: /healthz went unanswered, no pass ended, SIGTERM hung
// 51 s on the trial's node. Now a child reads it (src/gc/cache-reader.ts), abandoned past its 20 s bound: the agent
// answers throughout, the pass says "could not look" and releases nothing, the next pass says the earlier read is
// still stuck (no second reader left behind), and SIGTERM ends the agent at once. The built single executable.
import { execa, type ResultPromise } from 'execa';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/effects/ledger.js';
import { PLUGIN_DIR, scratch, SHIM } from '../support/shim/cni.js';
import { rootOrSkip, TestNet } from '../support/net/netns.js';
import { canHangFuse, hangFuse, type FuseTree } from '../support/hung-fuse.js';
import { waitFor } from '../support/wait.js';
import { agentArgs, followAgent, onePass } from '../support/shim/agent.js';
import { podRecord } from '../support/doubles/ledger-record.js';

const enabled = rootOrSkip() && canHangFuse();

/** GET from inside the node netns, given up after 3 s (a blocked agent never answers). */
async function get(node: string, path: string): Promise<{ status?: number; ms: number }> {
  const script = `const t0 = Date.now(); try { const r = await fetch('http://127.0.0.1:9740${path}', { signal: AbortSignal.timeout(3000) }); await r.text(); process.stdout.write(JSON.stringify({ status: r.status, ms: Date.now() - t0 })); } catch { process.stdout.write(JSON.stringify({ ms: Date.now() - t0 })); }`;
  const out = await execa('ip', ['netns', 'exec', node, process.execPath, '--input-type=module', '-e', script]);
  return JSON.parse(out.stdout) as { status?: number; ms: number };
}

// Two ways to hang: every request after INIT (the listing itself hangs), or only READ: the listing names regular files
// of plausible size, stat() and open() answer, and reading their content never returns. In both the reader child is
// what blocks, so the agent's guarantees are the same.
const MODES: Array<{ mode: string; tree?: (files: string[]) => FuseTree }> = [
  { mode: 'every request hangs' },
  { mode: 'only READ hangs', tree: (files) => Object.fromEntries(files.map((f) => [f, 640])) },
];

describe.skipIf(!enabled).each(MODES)('the runtime cache on a hung FUSE mount (issue 45 finding 3): $mode', ({ tree }) => {
  const net = new TestNet();
  afterEach(() => net.cleanup());
  const files = ['hung-c1-eth0', 'hung-c2-eth0', 'hung-c3-eth1'];

  it('the agent answers throughout, could not look (nothing released), leaves one reader behind, and stops at once on SIGTERM', {
    timeout: 120_000,
  }, async () => {
    const s = await scratch();
    net.defer(() => s.cleanup());
    const node = await net.netns('node');
    const confDir = join(s.dir, 'net.d');
    await mkdir(confDir);
    const network = 'hung';
    const list = {
      cniVersion: '1.0.0',
      name: network,
      plugins: [
        { type: 'ptp', ipam: { type: 'host-local', ranges: [[{ subnet: '10.241.0.0/24' }]], dataDir: s.dataDir } },
        { type: 'ipam-shim', stateDir: s.stateDir, logFile: s.logFile },
      ],
    };
    await writeFile(join(confDir, '10-hung.conflist'), JSON.stringify(list));
    // A pod attachment long dead by every other proof (no netns, old): only the cache could keep it, and the cache
    // cannot be looked at, so it must stay.
    const ledger = await new Ledger(s.stateDir, network).open();
    await ledger.put(podRecord('pod-gone', '10.241.0.9', new Date(Date.now() - 86_400_000).toISOString()));
    const cacheDir = join(s.dir, 'cache');
    await mkdir(cacheDir);
    let proc: ResultPromise | undefined;
    net.defer(async () => {
      proc?.kill('SIGKILL');
      await proc;
    });
    const mount = await hangFuse(cacheDir, tree ? { tree: { results: tree(files) } } : {});
    // Undone first (the reverse order): a process blocked on the mount, or removing its directory, waits for it.
    net.defer(() => mount.cleanup());

    const n = { network, confDir, cniPath: PLUGIN_DIR, cacheDir, binDir: join(s.dir, 'bin') };
    proc = execa(
      'ip',
      ['netns', 'exec', node, SHIM, ...agentArgs(SHIM, n, { graceSeconds: 0 }), '--interval', '3600', '--no-install', '--gc', 'apply'],
      { reject: false, buffer: false },
    );
    const a = followAgent(proc);

    // While the first pass's read hangs (20 s bound), the agent answers.
    await waitFor('the agent listening', async () => (await get(node, '/healthz')).status !== undefined, 15_000);
    for (const path of ['/healthz', '/metrics']) {
      const r = await get(node, path);
      expect(r.status, `${path} while the cache read hangs`).toBeDefined();
      expect(r.ms).toBeLessThan(2_000);
    }
    expect(a.passes()).toHaveLength(0);

    await waitFor('the first pass', () => a.passes().length >= 1, 40_000);
    expect(a.passes()[0]).toMatchObject({ steps: { gc: 'error', pods: 'error' }, released: 0 });
    expect(a.text()).toMatch(/not read within 20 s/);
    // READ only: the reader got past the listing and stat() and is blocked reading a file's content.
    if (tree) expect(mount.reads()).toBeGreaterThan(0);
    else expect(mount.reads()).toBe(0);

    // The next pass does not leave a second reader: it says the first is still stuck, at once.
    const t0 = Date.now();
    const second = await onePass(a);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(second).toMatchObject({ steps: { gc: 'error', pods: 'error' }, released: 0 });
    expect(a.text()).toMatch(/still blocked in the kernel/);
    expect(await ledger.get({ containerID: 'pod-gone', ifname: 'eth0' })).toBeDefined();

    // SIGTERM during a pass whose read is stuck: the agent ends at once.
    const t1 = Date.now();
    proc.kill('SIGTERM');
    const r = await proc;
    expect(r.exitCode).toBe(0);
    proc = undefined;
    expect(Date.now() - t1).toBeLessThan(5_000);
  });

  it('`ipam-shim gc --apply`: could not look within its bound, nothing released', { timeout: 90_000 }, async () => {
    const s = await scratch();
    net.defer(() => s.cleanup());
    const conflist = join(s.dir, '10-hung.conflist');
    await writeFile(
      conflist,
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'hung',
        plugins: [
          { type: 'ptp', ipam: { type: 'host-local' } },
          { type: 'ipam-shim', stateDir: s.stateDir, logFile: s.logFile },
        ],
      }),
    );
    const ledger = await new Ledger(s.stateDir, 'hung').open();
    await ledger.put(podRecord('pod-gone', '10.241.0.9', new Date(Date.now() - 86_400_000).toISOString()));
    const cacheDir = join(s.dir, 'cache');
    await mkdir(join(cacheDir, 'results'), { recursive: true });
    let gc: ResultPromise | undefined;
    net.defer(async () => {
      gc?.kill('SIGKILL');
      await gc;
    });
    // Hung below results/: the listing itself never answers (or, READ only: the files' content).
    const mount = await hangFuse(join(cacheDir, 'results'), tree ? { tree: tree(files) } : {});
    net.defer(() => mount.cleanup());
    const t0 = Date.now();
    gc = execa(SHIM, ['gc', '--conflist', conflist, '--cni-path', PLUGIN_DIR, '--cache-dir', cacheDir, '--apply', '--grace-seconds', '0'], {
      reject: false,
    });
    const r = await gc;
    gc = undefined;
    expect(Date.now() - t0).toBeLessThan(30_000);
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toMatch(/not read within 20 s/);
    if (tree) expect(mount.reads()).toBeGreaterThan(0);
    expect(await ledger.get({ containerID: 'pod-gone', ifname: 'eth0' })).toBeDefined();
  });
});
