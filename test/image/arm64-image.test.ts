// The two-architecture image (`npm run image -- --arch all`'s buildManifest: an amd64 and an arm64 image from their
// own mmdebstrap bases, cached in .cache/image/, and a manifest list naming both) in a PodmanBed's private store. The
// arm64 image runs here under qemu-user through binfmt_misc (scripts/install-deps.sh registers qemu-aarch64): what
// an arm64 node of a mixed pool pulls from the list and runs. The DaemonSet's securityContext and host paths are
// applied as in image.test.ts.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXECUTABLES, ROOT } from '../../scripts/image/build-image.js';
import { TestNet, uid } from '../support/net/netns.js';
import { buildTestManifest, nodeImagePrerequisites } from '../support/deploy/node-image.js';
import { daemonSet, podmanMountArgs, podmanSecurityArgs } from '../support/deploy/daemonset.js';
import { PodmanBed } from '../support/runtimes/podman.js';
import { agentGet } from '../support/shim/agent.js';
import { waitFor } from '../support/wait.js';

const enabled = nodeImagePrerequisites('the arm64 image test', {
  'dist/linux-arm64/ipam-shim (npm run build)': existsSync(join(ROOT, EXECUTABLES.arm64)),
  'qemu-aarch64 in binfmt_misc (scripts/install-deps.sh)': existsSync('/proc/sys/fs/binfmt_misc/qemu-aarch64'),
  'arch-test, for mmdebstrap --architectures=arm64 (scripts/install-deps.sh)': existsSync('/usr/bin/arch-test'),
});

const CONFLIST = JSON.stringify({ cniVersion: '0.3.1', name: 'cilium', plugins: [{ type: 'cilium-cni', ipam: { type: 'azure-ipam' } }] });
const PROBE_PORT = 9741; // the DaemonSet's --probe-listen, where the kubelet asks /healthz

const sha = async (p: string) =>
  createHash('sha256')
    .update(await readFile(p))
    .digest('hex');

describe.skipIf(!enabled)('the amd64 + arm64 image list, the arm64 image run under qemu-user', () => {
  const net = new TestNet();
  let bed: PodmanBed;
  let list: string;
  let arm: string;
  let amd: string;
  const podman = (args: string[], timeoutMs = 180_000) => bed.podman(args, { reject: false, timeoutMs });

  beforeAll(async () => {
    bed = await PodmanBed.create({ confList: { cniVersion: '0.4.0', plugins: [{ type: 'loopback' }] } });
    const built = await buildTestManifest(bed, 'arm64 image test');
    list = built.list;
    arm = built.images.find((i) => i.arch === 'arm64')!.tag;
    amd = built.images.find((i) => i.arch === 'amd64')!.tag;
  }, 1_800_000);

  afterAll(async () => {
    await bed?.cleanup();
    await net.cleanup();
  });

  it('each image says its architecture; the manifest list names both, linux/amd64 and linux/arm64', async () => {
    const archOf = async (ref: string) => String((await podman(['image', 'inspect', '--format', '{{.Os}}/{{.Architecture}}', ref])).stdout).trim();
    expect(await archOf(arm)).toBe('linux/arm64');
    expect(await archOf(amd)).toBe('linux/amd64');
    const inspected = await podman(['manifest', 'inspect', list]);
    expect(inspected.exitCode, String(inspected.stderr)).toBe(0);
    const manifests = (
      JSON.parse(String(inspected.stdout)) as { manifests: Array<{ digest: string; platform: { os: string; architecture: string } }> }
    ).manifests;
    expect(manifests.map((m) => `${m.platform.os}/${m.platform.architecture}`).sort()).toEqual(['linux/amd64', 'linux/arm64']);
    // The list's entries are those two images, not copies of one.
    const digest = async (ref: string) => String((await podman(['image', 'inspect', '--format', '{{.Digest}}', ref])).stdout).trim();
    expect(manifests.map((m) => m.digest).sort()).toEqual([await digest(amd), await digest(arm)].sort());
  });

  it('the list pulled for arm64 runs the AArch64 executable (its VERSION answer, the same build as amd64)', async () => {
    // `podman run --arch arm64 LIST`: the instance a node of that architecture gets.
    const run = (arch: string, args: string[], env: string[] = []) =>
      podman(['run', '--rm', '--arch', arch, '--network', 'none', ...env, list, ...args]);
    const uname = await podman(['run', '--rm', '--arch', 'arm64', '--network', 'none', '--entrypoint', 'uname', list, '-m']);
    expect(uname.exitCode, String(uname.stderr)).toBe(0);
    expect(String(uname.stdout).trim()).toBe('aarch64');
    const cni = await run('arm64', [], ['--env', 'CNI_COMMAND=VERSION']);
    expect(cni.exitCode, String(cni.stderr)).toBe(0);
    expect(JSON.parse(String(cni.stdout)).supportedVersions).toEqual(['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
    const armVersion = await run('arm64', ['version', '--json']);
    const amdVersion = await run('amd64', ['version', '--json']);
    expect(armVersion.exitCode, String(armVersion.stderr)).toBe(0);
    expect(JSON.parse(String(armVersion.stdout))).toEqual(JSON.parse(String(amdVersion.stdout)));
    // The file in the arm64 image is the build's arm64 executable, byte for byte.
    const inImage = await podman([
      'run',
      '--rm',
      '--arch',
      'arm64',
      '--network',
      'none',
      '--entrypoint',
      'sha256sum',
      list,
      '/usr/local/bin/ipam-shim',
    ]);
    expect(String(inImage.stdout).split(' ')[0]).toBe(await sha(join(ROOT, EXECUTABLES.arm64)));
  });

  it("the arm64 agent, run as the DaemonSet runs it, installs the arm64 executable and answers the kubelet's /healthz", async () => {
    const node = await net.netns('node');
    const view = await daemonSet();
    const hostDir = new Map<string, string>();
    for (const m of view.mounts) {
      if (!m.volume.hostPath) continue;
      const dir = join(bed.baseDir, 'node', m.volume.hostPath.path);
      await mkdir(dir, { recursive: true });
      hostDir.set(m.volume.hostPath.path, dir);
    }
    await writeFile(join(hostDir.get('/etc/cni/net.d')!, '05-cilium.conflist'), CONFLIST, { mode: 0o644 });
    const name = `ipam-shim-arm-${uid(8)}`;
    const r = await podman([
      'run',
      '--detach',
      '--name',
      name,
      '--arch',
      'arm64',
      ...podmanSecurityArgs(view),
      '--network',
      `ns:/run/netns/${node}`,
      ...podmanMountArgs(view, (p) => hostDir.get(p)!),
      list,
      'agent',
      '--probe-listen',
      `127.0.0.1:${PROBE_PORT}`,
    ]);
    expect(r.exitCode, String(r.stderr)).toBe(0);
    const logs = async () => {
      const l = await podman(['logs', name]);
      return `${l.stdout}\n${l.stderr}`;
    };
    // Under qemu the agent starts ~10x slower than native: wait for the answer, not for a time.
    await waitFor(
      'the arm64 agent answers /healthz',
      async () => (await agentGet(node, '/healthz', PROBE_PORT).catch(() => ({ status: 0 }))).status === 200,
      120_000,
      1_000,
    ).catch(async (e: unknown) => {
      throw new Error(`${(e as Error).message}\n${await logs()}`);
    });
    const installed = join(hostDir.get('/opt/cni/bin')!, 'ipam-shim');
    await waitFor(
      'the arm64 executable in the bin dir',
      async () => existsSync(installed) && (await sha(installed)) === (await sha(join(ROOT, EXECUTABLES.arm64))),
      120_000,
      1_000,
    );
    expect((await podman(['inspect', '--format', '{{.State.Running}}', name])).stdout).toBe('true');
    expect((await podman(['stop', '--time', '20', name])).exitCode).toBe(0);
  }, 300_000);
});
