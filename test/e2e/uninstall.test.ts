// `ipam-shim uninstall` beyond the default route (issue 43 items 1 and 8), through the BUILT CLI on a simulated node:
// - Cilium's route (--keep-lists, --source-list, --wait): the list is cilium-agent's and is left byte-identical;
//   the executable stays while the list on the node or the ConfigMap's list (what cilium-agent writes at its next
//   start) names the shim, and goes as soon as neither does;
// - --purge: the ledger (made by real ADDs), the log with its rotated files and the metrics file are removed once
//   the executable is gone, and nothing beside them (cilium-agent's own addresses in it are named); a stateDir
//   holding something that is not a ledger is kept and named (exit 1).
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { invoke, scratch, SHIM } from '../support/shim/cni.js';
import { shimConf } from '../support/shim/conf.js';
import { waitFor } from '../support/wait.js';

const CILIUM = { cniVersion: '0.3.1', name: 'cilium', plugins: [{ type: 'cilium-cni', ipam: { type: 'azure-ipam' } }] };
const WITH_SHIM = { ...CILIUM, plugins: [...CILIUM.plugins, { type: 'ipam-shim', delegate: { type: 'azure-ipam' } }] };
const text = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;

let s: Awaited<ReturnType<typeof scratch>>;
let binDir: string;
let confDir: string;
let conflist: string;
/** The cni-configuration ConfigMap as the kubelet mounts it (a directory, the key a file). */
let source: string;

beforeEach(async () => {
  s = await scratch();
  binDir = join(s.dir, 'opt/cni/bin');
  confDir = join(s.dir, 'etc/cni/net.d');
  conflist = join(confDir, '05-cilium.conflist');
  source = join(s.dir, 'cni-configuration/cni-config');
  for (const d of [binDir, confDir, join(s.dir, 'cni-configuration')]) await mkdir(d, { recursive: true });
  await writeFile(join(binDir, 'ipam-shim'), 'the executable\n', { mode: 0o755 });
  await writeFile(join(binDir, 'cilium-cni'), 'cilium-cni\n', { mode: 0o755 });
});
afterEach(() => s.cleanup());

const cli = (args: string[]) => execa(SHIM, args, { reject: false, timeout: 60_000 });
const dirs = () => ['--cni-bin-dir', binDir, '--conf-dir', confDir];
/** Written as cilium-agent writes it (renameio: a temp file renamed over it). */
async function ciliumWrites(path: string, v: unknown): Promise<void> {
  await writeFile(`${path}.tmp`, text(v));
  await rename(`${path}.tmp`, path);
}

describe("uninstall on Cilium's route (--keep-lists)", () => {
  it('the list stays byte-identical; the executable stays while it names the shim, and goes once it does not', async () => {
    await writeFile(conflist, text(WITH_SHIM));
    const r = await cli(['uninstall', ...dirs(), '--keep-lists', '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ conflists: [], binary: { action: 'kept' }, stillReferenced: [conflist] });
    expect(await readFile(conflist, 'utf8')).toBe(text(WITH_SHIM));
    expect(existsSync(join(binDir, 'ipam-shim'))).toBe(true);
    await ciliumWrites(conflist, CILIUM);
    const again = await cli(['uninstall', ...dirs(), '--keep-lists']);
    expect([again.exitCode, again.stdout]).toEqual([0, `conflist: left as it is (--keep-lists)\nbinary: ${join(binDir, 'ipam-shim')} removed`]);
    expect(await readdir(binDir)).toEqual(['cilium-cni']);
  });

  it('--source-list: the ConfigMap still names the shim (the next cilium-agent start writes it back): the executable stays', async () => {
    await writeFile(conflist, text(CILIUM));
    await writeFile(source, text(WITH_SHIM));
    const r = await cli(['uninstall', ...dirs(), '--keep-lists', '--source-list', source, '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ binary: { action: 'kept' }, stillReferenced: [source] });
    // A ConfigMap list that cannot be parsed is "could not look", never "names nothing".
    await writeFile(source, '{"plugins": [');
    expect(JSON.parse((await cli(['uninstall', ...dirs(), '--keep-lists', '--source-list', source, '--json'])).stdout)).toMatchObject({
      binary: { action: 'kept' },
    });
    expect(existsSync(join(binDir, 'ipam-shim'))).toBe(true);
  });

  it('--wait, the removal pod started first: waits through the ConfigMap change and the cilium-agent restart, then removes it', async () => {
    await writeFile(conflist, text(WITH_SHIM));
    await writeFile(source, text(WITH_SHIM));
    const p = execa(SHIM, ['uninstall', ...dirs(), '--keep-lists', '--source-list', source, '--wait'], { reject: false, timeout: 60_000 });
    await new Promise((r) => setTimeout(r, 1_500));
    expect(existsSync(join(binDir, 'ipam-shim'))).toBe(true);
    // The ConfigMap loses the entry (the kubelet swaps the mounted file): the node's list still names it.
    await ciliumWrites(source, CILIUM);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(existsSync(join(binDir, 'ipam-shim'))).toBe(true);
    expect(p.exitCode).toBeNull();
    // cilium-agent restarts and writes the list from the ConfigMap.
    await ciliumWrites(conflist, CILIUM);
    const r = await p;
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain(`binary: ${join(binDir, 'ipam-shim')} removed`);
    // What it waited for, said when it changed (not every second).
    expect(r.stderr.trim().split('\n')).toEqual([
      `waiting: the executable stays while ${conflist}, ${source} name the shim`,
      `waiting: the executable stays while ${conflist} names the shim`,
    ]);
    expect(await readFile(conflist, 'utf8')).toBe(text(CILIUM));
  });

  it('--wait stopped by SIGTERM while a list names the shim: exit 1, the executable stays', async () => {
    await writeFile(conflist, text(WITH_SHIM));
    const p = execa(SHIM, ['uninstall', ...dirs(), '--keep-lists', '--wait'], { reject: false, timeout: 60_000 });
    await waitFor('waiting', () => existsSync(conflist) && p.pid !== undefined);
    await new Promise((r) => setTimeout(r, 1_000));
    p.kill('SIGTERM');
    const r = await p;
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toContain('stopped while waiting: the executable stays');
    expect(existsSync(join(binDir, 'ipam-shim'))).toBe(true);
  });
});

describe('uninstall --purge: nothing of the shim stays on the node', () => {
  /** The shim's state as real ADDs leave it: a ledger, the log in its own directory with a rotated file, the metrics file. */
  async function nodeState(owners: string[]) {
    const lib = join(s.dir, 'var/lib/cni');
    const logDir = join(s.dir, 'var/log/ipam-shim');
    await mkdir(lib, { recursive: true });
    await mkdir(logDir, { recursive: true });
    const keys = {
      stateDir: join(lib, 'ipam-shim'),
      logFile: join(logDir, 'ipam-shim.log'),
      metricsFile: join(lib, 'ipam-shim-metrics.prom'),
      residue: { ebtables: false, neigh: false },
      ipv6ProbeRewrite: 'off',
    };
    for (const [i, cid] of owners.entries()) {
      const conf = shimConf({
        placement: 'chained',
        name: 'cilium',
        dirs: keys,
        keys,
        top: { prevResult: { cniVersion: '1.0.0', ips: [{ address: `10.241.0.${10 + i}/24` }] } },
      });
      const out = await invoke(conf, { command: 'ADD', containerID: cid, netns: '/run/ipam-shim-no-such-dir/none', ifname: 'eth0' });
      expect(out.exitCode, out.stdout + out.stderr).toBe(0);
    }
    await writeFile(join(logDir, 'ipam-shim.log.1'), '{"level":"info"}\n');
    // Others' files beside ours: never touched.
    await writeFile(join(lib, 'host-local-store'), 'theirs\n');
    await writeFile(join(s.dir, 'var/log/syslog'), 'theirs\n');
    expect(existsSync(keys.metricsFile)).toBe(true);
    expect((await readdir(join(keys.stateDir, 'cilium/records'))).length).toBe(owners.length);
    return { keys, lib, logDir };
  }
  const shimConfig = (keys: Record<string, unknown>) =>
    JSON.stringify({ stateDir: keys.stateDir, logFile: keys.logFile, metricsFile: keys.metricsFile });

  it('removes the ledger, the log (and its rotated file and directory) and the metrics file, and nothing else', async () => {
    const { keys, lib } = await nodeState(['pod-1', 'pod-2']);
    await writeFile(conflist, text(CILIUM));
    const r = await cli(['uninstall', ...dirs(), '--purge', '--shim-config', shimConfig(keys)]);
    expect(r.exitCode, r.stdout + r.stderr).toBe(0);
    console.log(`uninstall --purge said:\n${r.stdout}`);
    expect(await readdir(lib)).toEqual(['host-local-store']);
    expect(await readdir(join(s.dir, 'var/log'))).toEqual(['syslog']);
    expect(await readdir(binDir)).toEqual(['cilium-cni']);
    expect(r.stdout).toContain(`purge: ${keys.stateDir} removed`);
    expect(r.stdout).toContain(`purge: ${keys.metricsFile} removed`);
  });

  it("a ledger holding cilium-agent's own addresses goes too, and they are named: they stay allocated to cilium-agent", async () => {
    const { keys, lib } = await nodeState(['pod-1', 'cilium-agent-health']);
    await writeFile(conflist, text(CILIUM));
    const r = await cli(['uninstall', ...dirs(), '--purge', '--shim-config', shimConfig(keys)]);
    expect(r.exitCode, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain("purge: note: cilium-agent's own addresses (cilium/cilium-agent-health) stay allocated to it in the delegate's store");
    expect(await readdir(lib)).toEqual(['host-local-store']);
  });

  it('a stateDir holding something that is not a ledger is left whole; the executable kept: nothing purged', async () => {
    const { keys } = await nodeState(['pod-1']);
    await writeFile(join(keys.stateDir, 'not-ours'), 'x\n');
    await writeFile(conflist, text(CILIUM));
    const r = await cli(['uninstall', ...dirs(), '--purge', '--shim-config', shimConfig(keys)]);
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toContain(`purge: ${keys.stateDir} kept: holds not-ours, which is not an ipam-shim ledger`);
    expect(existsSync(join(keys.stateDir, 'not-ours'))).toBe(true);

    const other = await nodeState(['pod-1']);
    await writeFile(join(binDir, 'ipam-shim'), 'the executable\n', { mode: 0o755 });
    await writeFile(conflist, text(WITH_SHIM));
    const kept = await cli(['uninstall', ...dirs(), '--keep-lists', '--purge', '--shim-config', shimConfig(other.keys)]);
    expect(kept.exitCode).toBe(0);
    expect(kept.stdout).toContain('purge: nothing removed: the executable stays, and with it what it writes');
    expect(existsSync(other.keys.metricsFile)).toBe(true);
  });
});
