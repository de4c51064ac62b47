// The linux-arm64 single executable (dist/linux-arm64/ipam-shim) on this amd64 machine, under qemu-user:
// qemu-aarch64-static with Debian 12's arm64 glibc and libstdc++ as its library root (.deps/arm64-sysroot,
// scripts/arm64-deps.sh). Where a runtime execs the plugin it execs a two-line script that starts the arm64 file
// under qemu by name; the gc case runs it through binfmt_misc instead (scripts/install-deps.sh registers
// qemu-aarch64), since gc re-executes itself to read the cache.
// The programs the shim runs (host-local, ip, the cilium-cni stand-in) are the machine's own, as on an arm64 node
// they are that node's. Issue 43: VERSION, ADD/CHECK/DEL in the IPAM slot and chained in a netns, the agent's
// /healthz, and gc from the runtime's cache.
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { chmod, mkdir, open, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURE_BIN, hostLocalAllocations, invoke, ledgerRecords, PLUGIN_DIR, ROOT, SEA_SHIM } from '../support/shim/cni.js';
import { inNs, rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { CniRunner } from '../support/runtimes/runner.js';
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { ciliumCni, ciliumCniDir } from '../support/shim/cilium.js';
import { shimKeys } from '../support/shim/conf.js';
import { agentArgs, agentGet, followAgent } from '../support/shim/agent.js';
import { waitFor } from '../support/wait.js';

const ARM_SHIM = join(ROOT, 'dist/linux-arm64/ipam-shim');
const QEMU = '/usr/bin/qemu-aarch64-static';
const SYSROOT = join(ROOT, '.deps/arm64-sysroot');
/** ELF e_machine of AArch64 (EM_AARCH64). */
const EM_AARCH64 = 183;

for (const [what, path] of [
  ['the arm64 executable (npm run build)', ARM_SHIM],
  ['qemu-aarch64-static (scripts/install-deps.sh)', QEMU],
  ['the arm64 library root (scripts/arm64-deps.sh)', SYSROOT],
] as const)
  if (!existsSync(path)) throw new Error(`${path} is missing: ${what}`);

/** A plugin directory whose `ipam-shim` starts the arm64 executable under qemu. */
async function armBinDir(dir: string): Promise<string> {
  const bin = join(dir, 'arm64-bin');
  await mkdir(bin, { recursive: true });
  await writeFile(join(bin, 'ipam-shim'), `#!/bin/sh\nexec ${QEMU} -L ${SYSROOT} ${ARM_SHIM} "$@"\n`);
  await chmod(join(bin, 'ipam-shim'), 0o755);
  return bin;
}

const { s, net } = useScratchNet();
const cilium = useCiliumAgent();
const d = rootOrSkip() ? describe : describe.skip;

describe('the linux-arm64 single executable', () => {
  it('is an AArch64 ELF that embeds the same Node release, snapshot and flags as the amd64 one', async () => {
    const f = await open(ARM_SHIM, 'r');
    const head = Buffer.alloc(20);
    await f.read(head, 0, 20, 0);
    await f.close();
    expect(head.subarray(0, 4).toString('latin1')).toBe('\x7fELF');
    expect(head.readUInt16LE(18)).toBe(EM_AARCH64);
    // `version --json` names the commit built: both files come from the same build of the same bundle.
    const env = { env: { PATH: '/usr/sbin:/sbin' }, extendEnv: false };
    const arm = await execa(QEMU, ['-L', SYSROOT, ARM_SHIM, 'version', '--json'], env);
    const amd = await execa(SEA_SHIM, ['version', '--json'], env);
    expect(arm.stderr).toBe('');
    expect(JSON.parse(arm.stdout)).toMatchObject({ runtime: 'embedded', startupSnapshot: true });
    expect(JSON.parse(arm.stdout)).toEqual(JSON.parse(amd.stdout));
  });

  it('answers VERSION as a runtime calls it', async () => {
    const bin = await armBinDir(s.dir);
    const out = await invoke({ cniVersion: '1.1.0', name: 'armnet', type: 'ipam-shim' }, { command: 'VERSION', bin: join(bin, 'ipam-shim') });
    expect(out.exitCode, out.stderr).toBe(0);
    expect(out.json.supportedVersions).toEqual(['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
  });
});

d.each(['ipam', 'chained'] as const)('the linux-arm64 executable, shim %s, in a netns', (placement) => {
  it('ADD → CHECK → DEL through the runner: the pod pings its gateway, nothing is left', async () => {
    const node = await net.netns('node');
    const pod = await net.netns('pod');
    const name = `arm${uid()}`;
    const hostLocal = { type: 'host-local', dataDir: s.dataDir, ranges: [[{ subnet: '10.67.0.0/24' }]] };
    const shim = shimKeys({ dirs: s, delegate: hostLocal });
    const plugins = placement === 'chained' ? [ciliumCni(hostLocal), shim] : [ciliumCni(shim)];
    const runner = new CniRunner({
      confList: { cniVersion: '1.0.0', name, plugins },
      pluginDirs: [ciliumCniDir('1.17'), await armBinDir(s.dir), FIXTURE_BIN, PLUGIN_DIR],
      cacheDir: join(s.dir, 'cache'),
      netns: node,
      env: cilium.agent.env(),
    });
    const result: any = await runner.add('c1', `/run/netns/${pod}`);
    const ip = String(result.ips[0].address).split('/')[0]!;
    expect(ip).toMatch(/^10\.67\.0\./);
    expect((await inNs(pod, 'ping', ['-c', '1', '-W', '2', result.ips[0].gateway])).exitCode).toBe(0);
    expect(await ledgerRecords(s.stateDir, name)).toEqual(['c1:eth0.json']);
    await runner.check('c1', `/run/netns/${pod}`);
    await runner.del('c1', `/run/netns/${pod}`);
    expect(await hostLocalAllocations(s.dataDir, name)).toEqual([]);
    expect(await ledgerRecords(s.stateDir, name)).toEqual([]);
  });
});

d('the linux-arm64 executable: gc from the runtime cache', () => {
  it('a dry run reads the cache in its reader child (the arm64 file re-executed, through binfmt_misc) and plans exactly the dead uncached pod', async () => {
    // The reader child is the same arm64 executable started again; here only binfmt_misc can start it (as on an
    // arm64 node the kernel does), with QEMU_LD_PREFIX giving every qemu the arm64 libraries.
    if (!existsSync('/proc/sys/fs/binfmt_misc/qemu-aarch64'))
      throw new Error('qemu-aarch64 is not registered in binfmt_misc: scripts/install-deps.sh');
    const node = await net.netns('node');
    const name = `arm${uid()}`;
    const hostLocal = { type: 'host-local', dataDir: s.dataDir, ranges: [[{ subnet: '10.69.0.0/24' }]] };
    const plugins = [ciliumCni(shimKeys({ dirs: s, delegate: hostLocal }))];
    const cacheDir = join(s.dir, 'cache');
    const bin = await armBinDir(s.dir);
    const runner = new CniRunner({
      confList: { cniVersion: '1.0.0', name, plugins },
      pluginDirs: [ciliumCniDir('1.17'), bin, FIXTURE_BIN, PLUGIN_DIR],
      cacheDir,
      netns: node,
      env: cilium.agent.env(),
    });
    const ips = new Map<string, string>();
    for (const id of ['alive', 'dead']) {
      const pod = await net.netns(id);
      const result: any = await runner.add(id, `/run/netns/${pod}`);
      ips.set(id, String(result.ips[0].address).split('/')[0]!);
      if (id === 'dead') {
        // A pod gone without its DEL, and the runtime's cache entry gone with it: the leak gc looks for.
        await execa('ip', ['netns', 'delete', pod]);
        await unlink(runner.cacheFilePath(id));
      }
    }
    const conflist = join(s.dir, 'gc.conflist');
    await writeFile(conflist, JSON.stringify({ cniVersion: '1.0.0', name, plugins }));
    const gcArgs = ['gc', '--conflist', conflist, '--cni-path', [ciliumCniDir('1.17'), bin, FIXTURE_BIN, PLUGIN_DIR].join(':')];
    const r = await execa('ip', ['netns', 'exec', node, ARM_SHIM, ...gcArgs, '--cache-dir', cacheDir, '--grace-seconds', '0', '--json'], {
      reject: false,
      env: { QEMU_LD_PREFIX: SYSROOT },
    });
    // Exit 1: a dry run that found something to release.
    expect(r.exitCode, r.stderr).toBe(1);
    const report = JSON.parse(r.stdout);
    expect(report).toMatchObject({ network: name, apply: false });
    // The child read the cache: the live pod's entry is in it (a child that cannot start is exit 3, "cannot read").
    expect(report.valid.map((x: any) => x.containerID)).toEqual(['alive']);
    expect(report.release.map((x: any) => x.containerID)).toEqual(['dead']);
    expect(report.refused).toBeUndefined();
    // A dry run: both addresses still held.
    expect((await hostLocalAllocations(s.dataDir, name)).sort()).toEqual([ips.get('alive'), ips.get('dead')].sort());
  });
});

d('the linux-arm64 agent', () => {
  it("answers kubelet's /healthz", async () => {
    const node = await net.netns('node');
    const network = `arm${uid()}`;
    const confDir = join(s.dir, 'net.d');
    await mkdir(confDir, { recursive: true });
    const hostLocal = { type: 'host-local', dataDir: s.dataDir, ranges: [[{ subnet: '10.68.0.0/24' }]] };
    await writeFile(
      join(confDir, '10-arm.conflist'),
      JSON.stringify({ cniVersion: '1.0.0', name: network, plugins: [ciliumCni(hostLocal), shimKeys({ dirs: s, delegate: hostLocal })] }),
    );
    const bed = {
      network,
      confDir,
      cniPath: [ciliumCniDir('1.17'), PLUGIN_DIR, FIXTURE_BIN].join(':'),
      cacheDir: join(s.dir, 'cache'),
      binDir: join(s.dir, 'opt-cni-bin'),
    };
    const proc = execa('ip', ['netns', 'exec', node, QEMU, '-L', SYSROOT, ARM_SHIM, ...agentArgs(ARM_SHIM, bed, { graceSeconds: 0 })], {
      reject: false,
      buffer: false,
      env: cilium.agent.env(),
    });
    net.defer(async () => {
      proc.kill('SIGKILL');
      await proc;
    });
    const agent = followAgent(proc);
    // Under qemu a pass is ~10x slower than native: wait for the answer, not for a time.
    await waitFor('the arm64 agent answers /healthz', async () => (await agentGet(node, '/healthz')).status === 200, 90_000, 500);
    await waitFor('a pass', () => agent.passes().length > 0, 90_000);
    expect(agent.lines().filter((l) => l.level >= 50)).toEqual([]);
  });
});
