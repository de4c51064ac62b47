// `ipam-shim agent reload` (issue 37 part 10): the image has no `kill`, so the documented `kubectl exec … -- kill
// -HUP 1` failed (rc 127). The shim signals the agent itself: the built executable sends SIGHUP to a real agent
// (the built executable, in a node netns, --interval an hour so only the signal can start a pass), which runs a
// pass on it; a process that is not an agent is never signalled.
import { execa } from 'execa';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PLUGIN_DIR, ROOT, scratch, SHIM } from '../support/shim/cni.js';
import { rootOrSkip, TestNet } from '../support/net/netns.js';
import { waitFor as waitForEvery } from '../support/wait.js';
import { followAgent } from '../support/shim/agent.js';

const enabled = rootOrSkip();

const waitFor = (what: string, pred: () => Promise<boolean> | boolean, ms = 20_000) => waitForEvery(what, pred, ms);

describe.skipIf(!enabled)('ipam-shim agent reload', () => {
  const net = new TestNet();
  afterEach(() => net.cleanup());

  it('sends SIGHUP to the agent, which runs a pass at once; refuses a pid that is not an agent (nothing signalled) or not there', async () => {
    const s = await scratch();
    net.defer(() => s.cleanup());
    const node = await net.netns('node');
    const list = JSON.parse(await readFile(join(ROOT, 'conflist', 'generic-host-local-chained.conflist'), 'utf8'));
    Object.assign(list.plugins[1], { stateDir: s.stateDir, logFile: s.logFile });
    list.plugins[1].delegate.dataDir = s.dataDir;
    const confDir = join(s.dir, 'net.d');
    await mkdir(confDir);
    await writeFile(join(confDir, '10-generic.conflist'), JSON.stringify(list));
    // `ip netns exec` execs the agent: the child's pid is the agent's.
    const agent = execa(
      'ip',
      ['netns', 'exec', node, SHIM, 'agent', '--no-install', '--interval', '3600', '--conf-dir', confDir, '--cni-path', PLUGIN_DIR],
      {
        reject: false,
        buffer: false,
        env: { CNI_COMMAND: '' },
      },
    );
    agent.catch(() => undefined);
    net.defer(async () => {
      agent.kill('SIGKILL');
      await agent.catch(() => undefined);
    });
    const { lines, passes: passLines } = followAgent(agent);
    const passes = () => passLines().length;
    // The first pass comes at start; with --interval 3600 the next one is the signal's.
    await waitFor('the first pass', () => passes() >= 1);
    const t0 = Date.now();
    const r = await execa(SHIM, ['agent', 'reload', '--pid', String(agent.pid)], { reject: false });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain(`sent SIGHUP to the ipam-shim agent (pid ${agent.pid})`);
    await waitFor('a pass after reload', () => passes() >= 2);
    const took = Date.now() - t0;
    expect(took).toBeLessThan(10_000);
    console.log(`agent reload → pass logged in ${took} ms`);
    expect(lines().some((l) => l.msg === 'SIGHUP: reconcile pass now')).toBe(true);
    expect(agent.exitCode).toBeNull(); // SIGHUP is the agent's, not a kill

    // Not an agent: a `sleep` (SIGHUP would end it) is read, refused, left running.
    const sleeper = execa('sleep', ['60'], { reject: false });
    net.defer(async () => {
      sleeper.kill('SIGKILL');
      await sleeper;
    });
    const refused = await execa(SHIM, ['agent', 'reload', '--pid', String(sleeper.pid)], { reject: false });
    expect(refused.exitCode).toBe(3);
    expect(refused.stderr).toContain(`process ${sleeper.pid} is not an ipam-shim agent (sleep 60): nothing signalled`);
    await new Promise((res) => setTimeout(res, 200));
    expect(sleeper.exitCode).toBeNull(); // still running: never signalled

    const gone = await execa(SHIM, ['agent', 'reload', '--pid', '2147483646'], { reject: false });
    expect(gone.exitCode).toBe(3);
    expect(gone.stderr).toContain('no process 2147483646 here');
    const usage = await execa(SHIM, ['agent', 'reload', '--pid', 'one'], { reject: false });
    expect(usage.exitCode).toBe(2);
  });
});
