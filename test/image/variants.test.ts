// The shipped kustomize variants, rendered by `kubectl kustomize` (Kubernetes 1.36 from Debian) and run under
// podman as the kubelet would run their pods (the flags test/support/deploy/daemonset.ts derives from the rendered
// manifest: securityContext, mounts, the command line with its $(VARS) filled from the rendered ConfigMaps), in a
// network namespace standing for the node whose host paths are temp dirs:
//   overlays/uninstall     the removal path: after the default DaemonSet installed the shim, the removal pod's
//                          init container leaves every file of the node's CNI dirs byte-identical to before;
//   overlays/cilium-route  Cilium's own route: on a fresh node (no conflist yet) the init container puts the
//                          executable there and exits 0; the agent verifies the list Cilium writes from the
//                          cni-configuration ConfigMap and never edits it;
//   overlays/cilium-route-uninstall  its removal, on two nodes, in both orders, with a cilium-agent stand-in that
//                          writes the ConfigMap's list at its restart (test/support/doubles/cilium-cni-writer.ts)
//                          and pods ADDed through the node's list (cilium-cni, azure-ipam and CNS stand-ins).
import { createHash } from 'node:crypto';
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { lstat, mkdir, readdir, readFile, readlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../scripts/image/build-image.js';
import { commandLine, daemonSetView, kubectlBin, podmanMountArgs, podmanSecurityArgs, renderKustomization } from '../support/deploy/daemonset.js';
import { CiliumAgentStandIn } from '../support/doubles/cilium-agent.js';
import { CiliumCniConfWriter, projectConfigMap } from '../support/doubles/cilium-cni-writer.js';
import { CnsStandin, withAzureIpamStandin } from '../support/doubles/cns.js';
import { FIXTURE_BIN, PLUGIN_DIR } from '../support/paths.js';
import { CniRunner } from '../support/runtimes/runner.js';
import { ciliumCniDir } from '../support/shim/cilium.js';
import { inNs, TestNet, uid } from '../support/net/netns.js';
import { buildTestImage, nodeImagePrerequisites } from '../support/deploy/node-image.js';
import { PodmanBed } from '../support/runtimes/podman.js';
import { waitFor as waitForEvery } from '../support/wait.js';

const enabled = nodeImagePrerequisites('the variant tests', { 'kubectl 1.36 (scripts/install-deps.sh: .deps/kubectl-1.36)': Boolean(kubectlBin()) });

type Obj = Record<string, any>;
// AKS's /etc/cni/net.d/05-cilium.conflist (cilium-cni + azure-ipam), as test/e2e/install.test.ts has it.
const AKS_CILIUM =
  '{\n\t"cniVersion": "0.3.1",\n\t"name": "cilium",\n\t"plugins": [\n\t\t{\n\t\t\t"type": "cilium-cni",\n\t\t\t"ipam": {\n\t\t\t\t"type": "azure-ipam"\n\t\t\t},\n\t\t\t"enable-debug": true,\n\t\t\t"log-file": "/var/log/cilium-cni.log"\n\t\t}\n\t]\n}\n';
/** What else a node's CNI dirs hold: none of it may change. */
const NODE_FILES: Record<string, { text: string; mode: number }> = {
  '/etc/cni/net.d/10-azure.conflist.cilium_bak': {
    text: '{"cniVersion":"0.3.0","name":"azure","plugins":[{"type":"azure-vnet","mode":"transparent","ipam":{"type":"azure-vnet-ipam"}}]}\n',
    mode: 0o600,
  },
  '/etc/cni/net.d/99-loopback.conf': { text: '{\n  "cniVersion": "0.3.1",\n  "name": "lo",\n  "type": "loopback"\n}\n', mode: 0o644 },
  '/opt/cni/bin/azure-ipam': { text: '#!/bin/sh\necho azure-ipam stand-in\n', mode: 0o755 },
  '/opt/cni/bin/cilium-cni': { text: '#!/bin/sh\necho cilium-cni stand-in\n', mode: 0o755 },
};
const NODE_IP = '10.240.0.4';
const CNI_DIRS = ['/etc/cni/net.d', '/opt/cni/bin'];

const mkdirP = async (d: string) => {
  await mkdir(d, { recursive: true });
  return d;
};
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Every entry below `dir` (relative path → "dir MODE", "file MODE SHA256" or "link TARGET"). */
async function tree(dir: string, rel = ''): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const name of (await readdir(join(dir, rel))).sort()) {
    const p = join(rel, name);
    const st = await lstat(join(dir, p));
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isSymbolicLink()) out.set(p, `link ${await readlink(join(dir, p))}`);
    else if (st.isDirectory()) {
      out.set(p, `dir ${mode}`);
      for (const [k, v] of await tree(dir, p)) out.set(k, v);
    } else out.set(p, `file ${mode} ${sha256(await readFile(join(dir, p)))}`);
  }
  return out;
}

/** Polls every 200 ms (each look runs podman). */
const waitFor = (what: string, pred: () => Promise<boolean> | boolean, ms = 30_000) => waitForEvery(what, pred, ms, 200);

describe.skipIf(!enabled)('the shipped variants under podman, as their DaemonSets run them', () => {
  const net = new TestNet();
  let bed: PodmanBed;
  let image: string;
  let node: string;
  const podman = (args: string[], timeoutMs = 120_000) => bed.podman(args, { reject: false, timeoutMs });

  /** A fresh node: every hostPath of the rendered DaemonSets a temp dir under `name`. */
  const nodeDirs = async (name: string, hostPaths: string[]) => {
    const dirs = new Map<string, string>();
    for (const p of hostPaths) {
      const d = join(bed.baseDir, name, p);
      await mkdir(d, { recursive: true });
      dirs.set(p, d);
    }
    return dirs;
  };
  const hostPathsOf = (ds: Obj): string[] => (ds.spec.template.spec.volumes as Obj[]).flatMap((v) => (v.hostPath ? [v.hostPath.path] : []));

  /** `podman run` of one container of a rendered DaemonSet, its image replaced by the one built here. */
  const runArgs = (ds: Obj, container: string, dirs: Map<string, string>, o: { netns?: string; configMaps?: (name: string) => string } = {}) => {
    const view = daemonSetView(ds, container);
    expect(view.container.image, 'the image the kustomization names').toMatch(/^ghcr\.io\/example\/ipam-shim:/);
    return [
      ...podmanSecurityArgs(view),
      '--network',
      `ns:/run/netns/${o.netns ?? node}`,
      ...podmanMountArgs(
        view,
        (p) => {
          const d = dirs.get(p);
          if (!d) throw new Error(`no node dir for ${p}`);
          return d;
        },
        o.configMaps,
      ),
    ];
  };
  /**
   * A probe of the rendered DaemonSet's container as the kubelet sends it: to httpGet.host (default: the pod IP,
   * the node's on the host network) and httpGet.port (a number, or the name of one of the container's ports).
   */
  const kubeletProbe = async (ds: Obj, probe: 'livenessProbe' | 'readinessProbe' | 'startupProbe') => {
    const c = daemonSetView(ds, 'agent').container;
    const get = c[probe].httpGet;
    const port = typeof get.port === 'number' ? get.port : (c.ports as Obj[]).find((p) => p.name === get.port)?.containerPort;
    const r = await inNs(
      node,
      'curl',
      ['-s', '-m', '5', '-o', '/dev/null', '-w', '%{http_code}', `http://${get.host ?? NODE_IP}:${port}${get.path}`],
      {
        reject: false,
      },
    );
    return Number(r.stdout.trim());
  };
  const readyz = async () => {
    const r = await inNs(node, 'curl', ['-s', '-m', '5', '-w', '\n%{http_code}', `http://${NODE_IP}:9740/readyz`], { reject: false });
    const lines = r.stdout.trim().split('\n');
    return { code: Number(lines.pop()), body: lines.join('\n') };
  };

  beforeAll(async () => {
    bed = await PodmanBed.create({ confList: { cniVersion: '0.4.0', plugins: [{ type: 'loopback' }] } });
    image = await buildTestImage(bed, 'variant tests');
    node = await net.netns('node');
    const vnet = await net.netns('vnet');
    await net.veth(node, 'eth0', vnet, 'eth0');
    await inNs(node, 'ip', ['addr', 'add', `${NODE_IP}/24`, 'dev', 'eth0']);
    await inNs(node, 'ip', ['link', 'set', 'lo', 'up']);
  }, 600_000);

  afterAll(async () => {
    await bed?.cleanup();
    await net.cleanup();
  });

  it('the image carries the OCI labels: title, description, version, revision (this commit), source, licenses', async () => {
    const r = await podman(['image', 'inspect', '--format', '{{json .Labels}}', image]);
    expect(r.exitCode, String(r.stderr)).toBe(0);
    const labels = JSON.parse(String(r.stdout)) as Record<string, string>;
    const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string; license: string };
    const head = (await execa('git', ['-C', ROOT, 'rev-parse', 'HEAD'])).stdout.trim();
    const oci = Object.fromEntries(Object.entries(labels).filter(([k]) => k.startsWith('org.opencontainers.image.')));
    console.log(`image labels: ${JSON.stringify(oci, null, 1)}`);
    expect(oci).toMatchObject({
      'org.opencontainers.image.title': 'ipam-shim',
      'org.opencontainers.image.version': pkg.version,
      'org.opencontainers.image.revision': head,
      'org.opencontainers.image.licenses': pkg.license,
    });
    expect(oci['org.opencontainers.image.description']).toMatch(/cilium-cni/);
    expect(oci['org.opencontainers.image.source']).toMatch(/^(https?:\/\/|git@|\/)/);
  });

  it('removal (overlays/uninstall): after the default DaemonSet installed the shim, every file of the CNI dirs is byte-identical to before', async () => {
    const base = await renderKustomization('deploy');
    const removal = await renderKustomization('overlays/uninstall');
    const agentDs = base.find((d) => d.kind === 'DaemonSet')!;
    const removalDs = removal.find((d) => d.kind === 'DaemonSet')!;
    // The same DaemonSet updated in place: the agent on a node stops before the removal pod starts there.
    expect([removalDs.metadata.name, removalDs.spec.selector]).toEqual([agentDs.metadata.name, agentDs.spec.selector]);
    expect(removalDs.spec.template.spec.initContainers.map((c: Obj) => c.name)).toEqual(['uninstall']);

    const dirs = await nodeDirs('removal-node', [...new Set([...hostPathsOf(agentDs), ...hostPathsOf(removalDs)])]);
    await writeFile(join(dirs.get('/etc/cni/net.d')!, '05-cilium.conflist'), AKS_CILIUM, { mode: 0o644 });
    for (const [p, f] of Object.entries(NODE_FILES)) {
      const d = CNI_DIRS.find((c) => p.startsWith(`${c}/`))!;
      await writeFile(join(dirs.get(d)!, p.slice(d.length + 1)), f.text, { mode: f.mode });
    }
    const before = new Map<string, Map<string, string>>();
    for (const d of CNI_DIRS) before.set(d, await tree(dirs.get(d)!));

    // 1. The default DaemonSet's agent, with its rendered command line, installs the shim.
    const agent = `agent-${uid(6)}`;
    const cmd = commandLine(
      daemonSetView(agentDs).container,
      base.filter((d) => d.kind === 'ConfigMap'),
      NODE_IP,
    );
    const started = await podman([
      'run',
      '--detach',
      '--name',
      agent,
      ...runArgs(agentDs, 'agent', dirs),
      '--entrypoint',
      cmd[0]!,
      image,
      ...cmd.slice(1),
    ]);
    expect(started.exitCode, String(started.stderr)).toBe(0);
    const conflist = join(dirs.get('/etc/cni/net.d')!, '05-cilium.conflist');
    await waitFor('the shim chained', async () => (await readFile(conflist, 'utf8')).includes('"ipam-shim"'));
    await waitFor('/readyz 200', async () => (await readyz()).code === 200, 75_000).catch(async (e) => {
      throw new Error(`${e.message}: ${JSON.stringify(await readyz())}\n${String((await podman(['logs', agent])).stdout)}`);
    });
    // The kubelet's probes reach the agent where the rendered DaemonSet sends them (the probe listener, issue 45).
    for (const p of ['startupProbe', 'livenessProbe', 'readinessProbe'] as const) expect(await kubeletProbe(agentDs, p), p).toBe(200);
    const installed = new Map<string, Map<string, string>>();
    for (const d of CNI_DIRS) installed.set(d, await tree(dirs.get(d)!));
    expect(installed.get('/opt/cni/bin')!.get('ipam-shim')).toMatch(/^file 755 /);
    expect(installed.get('/etc/cni/net.d')!.get('05-cilium.conflist')).not.toBe(before.get('/etc/cni/net.d')!.get('05-cilium.conflist'));
    // 2. The update rolls the node: the agent is stopped (SIGTERM), then the removal pod runs.
    expect((await podman(['stop', '--time', '10', agent])).exitCode).toBe(0);
    const un = runArgs(removalDs, 'uninstall', dirs);
    // Only what uninstall --purge writes is mounted, and nothing is created on a node where it is missing.
    expect(removalDs.spec.template.spec.volumes.map((v: Obj) => [v.hostPath.path, v.hostPath.type])).toEqual([
      ['/opt/cni/bin', 'Directory'],
      ['/etc/cni/net.d', 'Directory'],
      ['/var/lib/cni', 'Directory'],
      ['/var/log', 'Directory'],
    ]);
    const initCmd = commandLine(
      daemonSetView(removalDs, 'uninstall').container,
      removal.filter((d) => d.kind === 'ConfigMap'),
      NODE_IP,
    );
    const r = await podman(['run', '--rm', ...un, '--entrypoint', initCmd[0]!, image, ...initCmd.slice(1)]);
    expect(r.exitCode, String(r.stderr)).toBe(0);
    console.log(`removal: init container said:\n${String(r.stdout)}`);
    // The pod's one container then idles (Ready: rollout status returns); SIGTERM is not waited on (grace 1 s).
    const idle = `removed-${uid(6)}`;
    const mainCmd = commandLine(daemonSetView(removalDs, 'removed').container, [], NODE_IP);
    const run = await podman([
      'run',
      '--detach',
      '--name',
      idle,
      ...runArgs(removalDs, 'removed', dirs),
      '--entrypoint',
      mainCmd[0]!,
      image,
      ...mainCmd.slice(1),
    ]);
    expect(run.exitCode, String(run.stderr)).toBe(0);
    expect(String((await podman(['inspect', '--format', '{{.State.Running}}', idle])).stdout)).toBe('true');
    expect((await podman(['rm', '--force', '--time', String(removalDs.spec.template.spec.terminationGracePeriodSeconds), idle])).exitCode).toBe(0);

    const rows: string[] = [];
    for (const d of CNI_DIRS) {
      const after = await tree(dirs.get(d)!);
      for (const k of new Set([...before.get(d)!.keys(), ...installed.get(d)!.keys(), ...after.keys()]))
        rows.push(
          `${d}/${k}\n  before install ${before.get(d)!.get(k) ?? '-'}\n  installed      ${installed.get(d)!.get(k) ?? '-'}\n  after removal  ${after.get(k) ?? '-'}`,
        );
      expect(after, `${d} byte-identical to before the install`).toEqual(before.get(d));
    }
    console.log(`removal: node files (mode, sha256)\n${rows.join('\n')}`);
    // Nothing of the shim's is left (uninstall --purge): the ledger, the log and its directory, the metrics file went.
    const leftovers = [];
    for (const [p, d] of dirs) if (!CNI_DIRS.includes(p) && existsSync(d)) for (const [k, v] of await tree(d)) leftovers.push(`${p}/${k} ${v}`);
    console.log(`removal: left outside the CNI dirs:\n${leftovers.join('\n') || '(nothing)'}`);
    expect(leftovers.filter((l) => l.includes('ipam-shim'))).toEqual([]);
    expect(existsSync(dirs.get('/var/log/ipam-shim')!)).toBe(false);
  });

  it("Cilium's route (overlays/cilium-route): the executable goes on a fresh node; the agent verifies the list Cilium writes and never edits it", async () => {
    // The overlay and, applied on its own, Cilium's ConfigMap.
    const docs = [
      ...(await renderKustomization('overlays/cilium-route')),
      ...(await renderKustomization('deploy/components/cilium-route/cni-configuration')),
    ];
    const ds = docs.find((d) => d.kind === 'DaemonSet')!;
    const configMaps = docs.filter((d) => d.kind === 'ConfigMap');
    const cniConfiguration = configMaps.find((c) => c.metadata.name === 'cni-configuration')!;
    expect(cniConfiguration.metadata.namespace).toBe('kube-system');
    const listCiliumWrites = cniConfiguration.data['cni-config'] as string;
    expect(JSON.parse(listCiliumWrites).plugins.map((p: Obj) => p.type)).toEqual(['cilium-cni', 'ipam-shim']);

    const dirs = await nodeDirs('cilium-route-node', hostPathsOf(ds));
    const confDir = dirs.get('/etc/cni/net.d')!;
    // 1. A fresh node: no conflist at all yet. The init container puts the executable there and exits 0.
    const init = commandLine(daemonSetView(ds, 'install-binary').container, configMaps, NODE_IP);
    const r = await podman(['run', '--rm', ...runArgs(ds, 'install-binary', dirs), '--entrypoint', init[0]!, image, ...init.slice(1)]);
    expect([r.exitCode, String(r.stdout)], String(r.stderr)).toEqual([0, 'binary: /opt/cni/bin/ipam-shim installed']);
    expect(await readdir(confDir)).toEqual([]);
    expect(sha256(await readFile(join(dirs.get('/opt/cni/bin')!, 'ipam-shim')))).toBe(sha256(await readFile(join(ROOT, 'dist/ipam-shim'))));

    // 2. The agent, with the rendered command line (--no-install --conflist …), the CNI dirs read-only.
    const view = daemonSetView(ds, 'agent');
    expect(view.mounts.filter((m) => m.readOnly).map((m) => m.mountPath)).toEqual(['/opt/cni/bin', '/etc/cni/net.d', '/var/run/azure-vnet']);
    const cmd = commandLine(view.container, configMaps, NODE_IP);
    expect(cmd.slice(-3)).toEqual(['--no-install', '--conflist', '/etc/cni/net.d/05-cilium.conflist']);
    const agent = `agent-${uid(6)}`;
    const started = await podman([
      'run',
      '--detach',
      '--name',
      agent,
      ...runArgs(ds, 'agent', dirs),
      '--entrypoint',
      cmd[0]!,
      image,
      ...cmd.slice(1),
    ]);
    expect(started.exitCode, String(started.stderr)).toBe(0);
    await waitFor('the agent serving', async () => (await readyz()).code === 503).catch(async (e) => {
      throw new Error(`${e.message}: ${JSON.stringify(await readyz())}\n${String((await podman(['logs', agent])).stdout)}`);
    });
    expect(JSON.parse((await readyz()).body)).toMatchObject({ ready: false, reason: 'not-installed' });
    // 3. cilium-agent writes the ConfigMap's list as its conflist: the agent turns ready, the file keeps its bytes.
    const conflist = join(confDir, '05-cilium.conflist');
    await writeFile(conflist, listCiliumWrites, { mode: 0o644 });
    // The agent watches the list it verifies: a pass runs as soon as it appears (before issue 43, the next retry:
    // up to the interval). Each look here runs curl in the netns: 3 s bounds the agent's 1 s.
    const t0 = Date.now();
    await waitFor('/readyz 200', async () => (await readyz()).code === 200, 75_000).catch(async (e) => {
      throw new Error(`${e.message}: ${JSON.stringify(await readyz())}\n${String((await podman(['logs', agent])).stdout)}`);
    });
    const readyMs = Date.now() - t0;
    console.log(`cilium route: /readyz 200 ${readyMs} ms after the list was written`);
    expect(readyMs).toBeLessThan(3_000);
    for (const p of ['startupProbe', 'livenessProbe', 'readinessProbe'] as const) expect(await kubeletProbe(ds, p), p).toBe(200);
    // 4. A list without the entry (values reset by an upgrade): not ready, and still nothing edits the file.
    await writeFile(conflist, AKS_CILIUM, { mode: 0o644 });
    await waitFor('/readyz 503', async () => (await readyz()).code === 503);
    await new Promise((res) => setTimeout(res, 2_000));
    expect(await readFile(conflist, 'utf8')).toBe(AKS_CILIUM);
    expect(JSON.parse((await readyz()).body)).toMatchObject({ ready: false, reason: 'not-installed' });
    expect((await podman(['stop', '--time', '10', agent])).exitCode).toBe(0);
    expect(String((await podman(['inspect', '--format', '{{.State.ExitCode}}', agent])).stdout)).toBe('0');
  });

  it("Cilium's route, removal (overlays/cilium-route-uninstall) on two nodes, both orders: after it, a cilium-agent restart and a new pod work on every node", async () => {
    const route = await renderKustomization('overlays/cilium-route');
    const routeDs = route.find((d) => d.kind === 'DaemonSet')!;
    const [cm] = await renderKustomization('deploy/components/cilium-route/cni-configuration');
    expect(cm!.metadata.name).toBe('cni-configuration');
    const removal = await renderKustomization('overlays/cilium-route-uninstall');
    const removalDs = removal.find((d) => d.kind === 'DaemonSet')!;
    const removalCms = removal.filter((d) => d.kind === 'ConfigMap');
    // Cilium's ConfigMap is no object of either overlay: `kubectl delete -k` of them cannot delete it.
    for (const docs of [route, removal]) expect(docs.filter((d) => d.metadata.name === 'cni-configuration')).toEqual([]);

    // The nodes: their files apart (every hostPath a temp dir per node); one network namespace, which no step here
    // looks at, holds their plugins' datapath and the CNS stand-in they reach on its loopback.
    const nodeNs = await net.netns('rnodes');
    await inNs(nodeNs, 'ip', ['link', 'set', 'lo', 'up']);
    const agentApi = await CiliumAgentStandIn.start();
    net.defer(() => agentApi.stop());
    const cns = await CnsStandin.start({
      scheme: 'pod',
      pools: [{ subnet: '10.224.0.0/16', first: '10.224.1.10', last: '10.224.1.40', gateway: '10.224.0.1' }],
      dir: await mkdirP(join(bed.baseDir, 'route-cns')),
      netns: nodeNs,
      onCleanup: (stop) => net.defer(stop),
    });
    const hostPaths = [...new Set([...hostPathsOf(routeDs), ...hostPathsOf(removalDs)])];
    const shipped = JSON.parse(cm!.data['cni-config'] as string);
    const withoutShim = (l: Obj) => ({ ...l, plugins: l.plugins.filter((p: Obj) => p.type !== 'ipam-shim') });

    interface RouteNode {
      name: string;
      dirs: Map<string, string>;
      cmDir: string;
      cilium: CiliumCniConfWriter;
      /** The ConfigMap's list as made on this node: the shipped one over the stand-ins, its node paths in the node's dirs. */
      list: (withShim: boolean) => string;
    }
    const nodes: RouteNode[] = [];
    for (const name of ['route-a', 'route-b']) {
      const dirs = await nodeDirs(name, hostPaths);
      const cmDir = join(bed.baseDir, name, 'kubelet/configmaps/cni-configuration');
      const made = withAzureIpamStandin(structuredClone(shipped), cns);
      for (const p of made.plugins) {
        if (p.type === 'cilium-cni') p['log-file'] = join(bed.baseDir, name, 'cilium-cni.log');
        if (p.type === 'ipam-shim')
          Object.assign(p, {
            stateDir: join(dirs.get('/var/lib/cni')!, 'ipam-shim'),
            logFile: join(dirs.get('/var/log/ipam-shim')!, 'ipam-shim.log'),
            metricsFile: join(dirs.get('/var/lib/cni')!, 'ipam-shim-metrics.prom'),
            residue: { ebtables: false, neigh: false },
          });
      }
      const list = (withShim: boolean) => `${JSON.stringify(withShim ? made : withoutShim(made), null, '\t')}\n`;
      // Before the route: Cilium runs with its own list (no shim), other lists renamed away by cni-exclusive.
      await projectConfigMap(cmDir, { 'cni-config': list(false) });
      const cilium = new CiliumCniConfWriter(cmDir, dirs.get('/etc/cni/net.d')!);
      await cilium.start();
      nodes.push({ name, dirs, cmDir, cilium, list });
    }
    const lists = () => Promise.all(nodes.map(async (n) => readFile(n.cilium.listPath, 'utf8').catch(() => '(none)')));
    const binary = (n: RouteNode) => join(n.dirs.get('/opt/cni/bin')!, 'ipam-shim');

    /** A new pod on `n`: ADD then DEL through the node's list, as the runtime reads it from the conf dir. */
    const newPod = async (n: RouteNode) => {
      const bytes = await readFile(n.cilium.listPath, 'utf8');
      const rt = new CniRunner({
        confList: JSON.parse(bytes),
        confListBytes: bytes,
        pluginDirs: [n.dirs.get('/opt/cni/bin')!, ciliumCniDir('1.17'), FIXTURE_BIN, PLUGIN_DIR],
        cacheDir: join(bed.baseDir, n.name, 'runtime-cache'),
        netns: nodeNs,
        env: agentApi.env(),
      });
      const pod = await net.netns('rpod');
      const cid = `pod-${uid(8)}`;
      const args = `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=${cid};K8S_POD_INFRA_CONTAINER_ID=${cid}`;
      const result = (await rt.add(cid, `/run/netns/${pod}`, 'eth0', args)) as Obj;
      await rt.del(cid, `/run/netns/${pod}`, 'eth0', args);
      return { plugins: rt.invocations.filter((i) => i.command === 'ADD').map((i) => i.plugin), address: result.ips?.[0]?.address };
    };

    // Set-up, the safe order: 1. the overlay: every node's init container puts the executable there.
    for (const n of nodes) {
      const init = commandLine(daemonSetView(routeDs, 'install-binary').container, [], NODE_IP);
      const r = await podman([
        'run',
        '--rm',
        ...runArgs(routeDs, 'install-binary', n.dirs, { netns: nodeNs }),
        '--entrypoint',
        init[0]!,
        image,
        ...init.slice(1),
      ]);
      expect(r.exitCode, String(r.stderr)).toBe(0);
      expect(existsSync(binary(n))).toBe(true);
    }
    // 2. The ConfigMap with the entry, 3. Cilium's values (cilium-agent restarts and writes it): the shim is chained.
    for (const n of nodes) {
      await projectConfigMap(n.cmDir, { 'cni-config': n.list(true) });
      await n.cilium.restart();
      expect(await newPod(n)).toMatchObject({ plugins: ['cilium-cni', 'ipam-shim'] });
      expect(existsSync(join(n.dirs.get('/var/lib/cni')!, 'ipam-shim/cilium/records')), 'the shim recorded the pod').toBe(true);
    }
    const before = await lists();

    // Removal. Node b in the order an operator may get wrong: the removal pod starts first. It waits: the list
    // names the shim, and even while cilium-agent is down (its list gone with it) the ConfigMap still does.
    const removalRun = (n: RouteNode) => {
      const cmd = commandLine(daemonSetView(removalDs, 'uninstall').container, removalCms, NODE_IP);
      return [
        'run',
        ...runArgs(removalDs, 'uninstall', n.dirs, {
          netns: nodeNs,
          configMaps: (name) => (name === 'cni-configuration' ? n.cmDir : '/nonexistent'),
        }),
        '--entrypoint',
        cmd[0]!,
        image,
        ...cmd.slice(1),
      ];
    };
    const [a, b] = nodes as [RouteNode, RouteNode];
    const waiting = `removal-${uid(6)}`;
    expect((await podman(['run', '--detach', '--name', waiting, ...removalRun(b).slice(1)])).exitCode).toBe(0);
    await new Promise((r) => setTimeout(r, 2_000));
    await b.cilium.stop();
    expect(existsSync(b.cilium.listPath)).toBe(false);
    await new Promise((r) => setTimeout(r, 2_500));
    expect(existsSync(binary(b)), 'no list on the node, but the ConfigMap names the shim: the executable stays').toBe(true);
    await b.cilium.start();

    // The README's order, for the whole cluster: the ConfigMap without the entry (the kubelet updates the mounts) …
    const cmBefore = await readFile(join(a.cmDir, 'cni-config'), 'utf8');
    for (const n of nodes) await projectConfigMap(n.cmDir, { 'cni-config': n.list(false) });
    await new Promise((r) => setTimeout(r, 2_500));
    expect(existsSync(binary(b)), "the ConfigMap lost it, the node's list has not yet").toBe(true);
    expect(String((await podman(['inspect', '--format', '{{.State.Running}}', waiting])).stdout)).toBe('true');
    // … cilium-agent restarted on node a, then its removal pod: done at once.
    await a.cilium.restart();
    const r = await podman(['run', '--rm', ...removalRun(a).slice(1)]);
    expect(r.exitCode, String(r.stderr)).toBe(0);
    console.log(`cilium route removal, node a (README order): init container said:\n${String(r.stdout)}`);
    expect(existsSync(binary(a))).toBe(false);
    // Node b: its cilium-agent restarts; the waiting removal pod sees the list without the entry and finishes.
    await b.cilium.restart();
    await waitFor(
      'the waiting removal pod done',
      async () => String((await podman(['inspect', '--format', '{{.State.Running}}', waiting])).stdout) === 'false',
      30_000,
    );
    const waited = await podman(['inspect', '--format', '{{.State.ExitCode}}', waiting]);
    const said = await podman(['logs', waiting]);
    console.log(`cilium route removal, node b (removal first): init container said:\n${String(said.stdout)}${String(said.stderr)}`);
    expect(String(waited.stdout)).toBe('0');
    expect(String(said.stderr)).toContain('waiting: the executable stays while /etc/cni/net.d/05-cilium.conflist');
    await podman(['rm', '--force', waiting]);
    expect(existsSync(binary(b))).toBe(false);

    // After removal: a cilium-agent restart and a new pod work on every node; nothing of the shim is left.
    const after: string[] = [];
    for (const n of nodes) {
      after.push(await n.cilium.restart());
      expect(await newPod(n)).toMatchObject({ plugins: ['cilium-cni'], address: expect.stringMatching(/^10\.224\.1\.\d+\/32$/) });
      expect(await readFile(n.cilium.listPath, 'utf8')).not.toContain('ipam-shim');
      expect((await readdir(n.dirs.get('/var/lib/cni')!)).filter((f) => f.includes('ipam-shim'))).toEqual([]);
      expect(await readdir(n.dirs.get('/var/log')!)).toEqual([]);
      expect(await readdir(n.dirs.get('/opt/cni/bin')!)).toEqual([]);
    }
    const cmAfter = await readFile(join(a.cmDir, 'cni-config'), 'utf8');
    console.log(
      `cilium route removal, node a's list\n  before: ${before[0]}\n  after:  ${after[0]}\nthe ConfigMap's cni-config (kept, never deleted)\n  before: ${cmBefore}\n  after:  ${cmAfter}`,
    );

    // The control: the old removal's hazard is real and this test sees it — a ConfigMap still naming the shim,
    // cilium-agent restarts, and with the executable gone every new pod fails.
    await projectConfigMap(a.cmDir, { 'cni-config': a.list(true) });
    await a.cilium.restart();
    await expect(newPod(a)).rejects.toThrow(/failed to find plugin "ipam-shim"/);
  });
});
