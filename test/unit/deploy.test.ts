// deploy/ against the code: the DaemonSet mounts every host path the shim uses by default, at the same path
// inside the container (so no flag has to repeat a default), runs `install --watch` with the executable the
// Containerfile ships, with exactly the privileges measured for it; the kustomization generates the ConfigMap every
// reference names, and its shim config passes the plugin's own schema.
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ShimSettingsSchema } from '../../src/cni/config.js';
import { DEFAULT_CONF_DIR } from '../../src/conflist.js';
import { DEFAULT_CNI_PATH } from '../../src/network/open.js';
import { HOST_LOCAL_DEFAULT_DATA_DIR } from '../../src/effects/host-local-store.js';
import { parseShimConfig } from '../../src/cli/install.js';
import { AGENT_FLAGS, DEFAULT_AGENT_INTERVAL_S, parseAgentArgs } from '../../src/cli/agent.js';
import { ARCHES, BASE_PACKAGES, SUITE, TOOL_PACKAGES } from '../../scripts/image/base.js';
import { EXECUTABLE, EXECUTABLES } from '../../scripts/image/build-image.js';
import { SEA_TARGETS } from '../../scripts/sea.mjs';
import { DEFAULT_CACHE_DIR } from '../../src/gc/from-cache.js';
import { AZURE_VNET_RUN_DIR } from '../../src/effects/azure-ipam.js';
import {
  capabilityNames,
  daemonSet,
  deployDocs,
  kustomization,
  PODMAN_DEFAULT_SECCOMP,
  podmanMountArgs,
  podmanSecurityArgs,
} from '../support/deploy/daemonset.js';

const ROOT = resolve(import.meta.dirname, '../..');
const DEFAULTS = ShimSettingsSchema.parse({});
/** Where `ip netns` (and the agent-IP code) keep named namespaces. */
const NETNS_DIR = '/run/netns';
/**
 * The capabilities the agent was measured to need (docs/operations.md#privileges: each one's steps fail without
 * it in test/node/whole-node.test.ts, which runs the image with the DaemonSet's own list). Changing the list is
 * changing that measurement: run the whole-node test without the capability and say what fails.
 */
const MEASURED_CAPABILITIES = ['NET_ADMIN', 'SYS_ADMIN'];
/** Kubernetes' recommended labels (Kubernetes docs, "Recommended Labels"). */
const RECOMMENDED_LABELS = ['name', 'instance', 'version', 'component', 'part-of', 'managed-by'].map((l) => `app.kubernetes.io/${l}`);
const PKG_VERSION = (JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

type Obj = Record<string, any>;

const manifests = () => deployDocs('daemonset.yaml');

/** The ConfigMap the kustomization generates for the DaemonSet's references (its one generator). */
async function configMap() {
  const { configMaps } = await kustomization();
  expect(configMaps).toHaveLength(1);
  return configMaps[0]!;
}

interface Stage {
  from: string;
  name?: string;
  runs: string[];
  copies: Array<[string, string]>;
  entrypoint?: string[];
  cmd?: string[];
}

/** The Containerfile as its global ARGs and its stages (continuation lines joined, comments dropped). */
async function containerfile(): Promise<{ args: Map<string, string>; stages: Stage[] }> {
  const text = (await readFile(join(ROOT, 'deploy/Containerfile'), 'utf8')).replace(/\\\n/g, ' ');
  const lines = text.split('\n').filter((l) => l.trim() && !l.startsWith('#'));
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of lines) {
    const [, op = '', rest = ''] = /^(\w+)\s+(.*)$/.exec(line.trim()) ?? [];
    const stage = stages.at(-1);
    if (op === 'FROM') {
      const [from = '', as, name] = rest.split(/\s+/);
      stages.push({ from, ...(as?.toUpperCase() === 'AS' && name ? { name } : {}), runs: [], copies: [] });
    } else if (op === 'ARG' && !stage) {
      const [k = '', v = ''] = rest.split('=');
      args.set(k, v);
    } else if (!stage) throw new Error(`Containerfile: ${op} before FROM`);
    else if (op === 'RUN') stage.runs.push(rest);
    else if (op === 'COPY') stage.copies.push(rest.split(/\s+/) as [string, string]);
    else if (op === 'ENTRYPOINT') stage.entrypoint = JSON.parse(rest) as string[];
    else if (op === 'CMD') stage.cmd = JSON.parse(rest) as string[];
  }
  return { args, stages };
}

describe('deploy/daemonset.yaml', () => {
  it('is a hostNetwork DaemonSet whose container runs the node agent', async () => {
    const ds = (await manifests()).find((m) => m.kind === 'DaemonSet')!;
    expect(ds).toBeDefined();
    const spec = ds.spec.template.spec;
    expect(spec.hostNetwork).toBe(true);
    expect(spec.containers).toHaveLength(1);
    const c = spec.containers[0];
    const argv = [...(c.command ?? []), ...(c.args ?? [])];
    expect(argv[1]).toBe('agent');
    // Defaults, not flags: the mounts put the host paths where the code looks by default.
    expect(argv).not.toContain('--cni-bin-dir');
    expect(argv).not.toContain('--conf-dir');
  });

  it('runs with least privilege: the measured capabilities only, drop ALL, RuntimeDefault seccomp, a read-only root, no token', async () => {
    const { spec, container: c } = await daemonSet();
    const sc = c.securityContext;
    expect(sc.privileged ?? false).toBe(false);
    expect(sc.capabilities.drop).toEqual(['ALL']);
    expect([...sc.capabilities.add].sort()).toEqual(MEASURED_CAPABILITIES);
    expect(sc.seccompProfile).toEqual({ type: 'RuntimeDefault' });
    expect(sc.readOnlyRootFilesystem).toBe(true);
    // The API server refuses allowPrivilegeEscalation: false beside an added SYS_ADMIN.
    expect(sc.allowPrivilegeEscalation).toBeUndefined();
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(c.terminationMessagePolicy).toBe('FallbackToLogsOnError');
    for (const k of ['hostPID', 'hostIPC']) expect(spec[k] ?? false, k).toBe(false);
    // Measured: the agent and the commands run in the pod write nothing outside the host paths, so no emptyDir.
    expect(spec.volumes.filter((v: Obj) => !v.hostPath).map((v: Obj) => v.name)).toEqual([]);
  });

  it("mounts each host path at the same path, covering every default the shim uses, and of the node's logs only the shim's directory", async () => {
    const { mounts } = await daemonSet();
    for (const m of mounts) {
      expect(m.volume.hostPath?.path, m.name).toBe(m.mountPath);
      expect(m.volume.hostPath?.type, m.name).toMatch(/^(Directory|DirectoryOrCreate)$/);
      // Only Azure CNI's run state is read only: the shim reads azure-ipam's DEL queue there and writes nothing.
      expect(m.readOnly, m.name).toBe(m.mountPath === AZURE_VNET_RUN_DIR);
    }
    const { logFile } = ShimSettingsSchema.parse(parseShimConfig((await configMap()).data['shim-config.json']!));
    const mounted = mounts.map((m) => m.mountPath);
    const covered = (path: string) => mounted.some((p) => path === p || path.startsWith(`${p}/`));
    // gc's default cache dir too: a cache out of sight makes gc refuse (docs/failure-model.md).
    for (const path of [
      DEFAULT_CNI_PATH,
      DEFAULT_CONF_DIR,
      DEFAULTS.stateDir,
      logFile,
      HOST_LOCAL_DEFAULT_DATA_DIR,
      NETNS_DIR,
      `${DEFAULT_CACHE_DIR}/results`,
    ]) {
      expect(covered(path), path).toBe(true);
    }
    // The log in a directory of its own (a rotated file beside it stays visible to both writers), never all of /var/log.
    expect(logFile).toBe('/var/log/ipam-shim/ipam-shim.log');
    // Exactly these six, nothing broader (no /, /var, /var/run or /var/log).
    expect(mounted.sort()).toEqual(
      [DEFAULT_CNI_PATH, DEFAULT_CONF_DIR, dirname(DEFAULTS.stateDir), dirname(logFile), NETNS_DIR, AZURE_VNET_RUN_DIR].sort(),
    );
    expect(mounts.find((m) => m.mountPath === NETNS_DIR)!.propagation).toBe('HostToContainer');
  });

  it('runs on the linux nodes of exactly the architectures the image list holds: amd64 and arm64', async () => {
    const ds = (await manifests()).find((m) => m.kind === 'DaemonSet');
    const spec = ds!.spec.template.spec;
    expect(spec.nodeSelector).toBeUndefined();
    expect(spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms).toEqual([
      {
        matchExpressions: [
          { key: 'kubernetes.io/os', operator: 'In', values: ['linux'] },
          { key: 'kubernetes.io/arch', operator: 'In', values: Object.keys(ARCHES) },
        ],
      },
    ]);
    // `npm run image -- --arch all` builds one image per key of ARCHES (each with its own executable, below).
    expect(Object.keys(ARCHES)).toEqual(['amd64', 'arm64']);
    expect(EXECUTABLE).toBe(join(ROOT, EXECUTABLES.amd64));
  });
  it("carries Kubernetes' recommended labels, the same on the DaemonSet, its pods and the ConfigMap; the selector is the one immutable label", async () => {
    const { ds } = await daemonSet();
    const labels = ds.metadata.labels;
    expect(Object.keys(labels).sort()).toEqual([...RECOMMENDED_LABELS].sort());
    expect(labels['app.kubernetes.io/name']).toBe('ipam-shim');
    expect(labels['app.kubernetes.io/version']).toBe(PKG_VERSION);
    expect(ds.spec.template.metadata.labels).toEqual(labels);
    expect((await configMap()).labels).toEqual(labels);
    // Unchanged since the first release, so `kubectl apply` updates an existing DaemonSet (a selector is immutable).
    expect(ds.spec.selector.matchLabels).toEqual({ 'app.kubernetes.io/name': 'ipam-shim' });
    // The image's tag is the version, in the DaemonSet and in the kustomization's images entry.
    const { k } = await kustomization();
    const image = ds.spec.template.spec.containers[0].image as string;
    expect(image.slice(image.lastIndexOf(':') + 1)).toBe(PKG_VERSION);
    // newName is spelt out (the same name) so an operator sees where their registry's name goes.
    const name = image.slice(0, image.lastIndexOf(':'));
    expect(k.images).toEqual([{ name, newName: name, newTag: PKG_VERSION }]);
  });
});

describe('deploy/kustomization.yaml', () => {
  it('generates the ConfigMap the DaemonSet reads, with a hashed name (a changed setting rolls the pods), and nothing else makes one', async () => {
    const { k } = await kustomization();
    const cm = await configMap();
    const all = await manifests();
    expect(k.resources).toEqual(['daemonset.yaml']);
    // The hash suffix is what makes a change roll the pods.
    expect(cm.options.disableNameSuffixHash ?? false).toBe(false);
    expect(k.generatorOptions?.disableNameSuffixHash ?? false).toBe(false);
    // A ConfigMap of the same name among the resources would clash with the generated one.
    expect(all.filter((m) => m.kind === 'ConfigMap')).toEqual([]);
    const ds = all.find((m) => m.kind === 'DaemonSet')!;
    expect(cm.namespace).toBe(ds.metadata.namespace);
    const c = ds.spec.template.spec.containers[0];
    const refs = (c.env as Obj[]).map((e) => e.valueFrom?.configMapKeyRef).filter(Boolean);
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of refs) {
      expect(ref.name).toBe(cm.name);
      expect(cm.data[ref.key], `key ${ref.key}`).toBeDefined();
    }
    // No setting is generated that nothing reads; no other way to a ConfigMap (envFrom, a volume) bypasses the checks.
    expect(Object.keys(cm.data).sort()).toEqual(refs.map((r) => r.key).sort());
    expect(c.envFrom).toBeUndefined();
    for (const v of ds.spec.template.spec.volumes) expect(v.configMap, v.name).toBeUndefined();
  });

  it('passes a shim config that the plugin schema accepts', async () => {
    const text = (await configMap()).data['shim-config.json']!;
    expect(() => parseShimConfig(text)).not.toThrow();
  });

  const kubectl = ['/usr/bin/kubectl', '/usr/local/bin/kubectl'].find((p) => existsSync(p));
  // kubectl's own kustomize, where the machine has kubectl (the checks above need none).
  it.skipIf(!kubectl)(
    "kubectl kustomize renders it: every reference names the hashed ConfigMap, and a changed setting changes the pods' template",
    async () => {
      const render = async (dir: string) => {
        const docs = parseAllDocuments((await execa(kubectl!, ['kustomize', dir])).stdout).map((d) => d.toJS() as Obj);
        const cm = docs.find((d) => d.kind === 'ConfigMap')!;
        const ds = docs.find((d) => d.kind === 'DaemonSet')!;
        return { cm, ds, refs: (ds.spec.template.spec.containers[0].env as Obj[]).map((e) => e.valueFrom?.configMapKeyRef?.name).filter(Boolean) };
      };
      const dir = await mkdtemp(join(tmpdir(), 'deploy-'));
      try {
        const before = await render(join(ROOT, 'deploy'));
        expect(before.cm.metadata.name).toMatch(/^ipam-shim-config-[a-z0-9]{10}$/);
        expect(before.cm.metadata.namespace).toBe('kube-system');
        expect(new Set(before.refs)).toEqual(new Set([before.cm.metadata.name]));
        expect(before.cm.data).toEqual((await configMap()).data);
        expect(before.cm.metadata.labels).toEqual(before.ds.metadata.labels);
        await cp(join(ROOT, 'deploy'), dir, { recursive: true });
        const k = join(dir, 'kustomization.yaml');
        await writeFile(k, (await readFile(k, 'utf8')).replace('gc-mode=confirmed', 'gc-mode=apply'));
        const after = await render(dir);
        expect(after.cm.metadata.name).not.toBe(before.cm.metadata.name);
        expect(new Set(after.refs)).toEqual(new Set([after.cm.metadata.name]));
        expect(after.ds.spec.template).not.toEqual(before.ds.spec.template);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});

describe('the podman flags the image and whole-node tests derive from the DaemonSet (test/support/deploy/daemonset.ts)', () => {
  it("are exactly the DaemonSet's settings: its capabilities, podman's default seccomp profile, a read-only root without podman's tmpfs, its mounts", async () => {
    const view = await daemonSet();
    expect(podmanSecurityArgs(view)).toEqual([
      '--cap-drop=ALL',
      ...MEASURED_CAPABILITIES.map((c) => `--cap-add=${c}`),
      '--security-opt',
      `seccomp=${PODMAN_DEFAULT_SECCOMP}`,
      '--read-only',
      '--read-only-tmpfs=false',
    ]);
    const mounts = podmanMountArgs(view, (p) => `/node${p}`);
    expect(mounts).toContain('/node/run/netns:/run/netns:rslave');
    expect(mounts).toContain('/node/var/log/ipam-shim:/var/log/ipam-shim');
    expect(mounts.filter((a) => a === '--volume')).toHaveLength(view.mounts.length);
  });

  it('refuse what they cannot mirror instead of leaving it out', () => {
    const spec = { securityContext: {} };
    const c = (securityContext: Obj) => ({ spec, container: { securityContext } });
    expect(() => podmanSecurityArgs(c({ runAsUser: 1000 }))).toThrow(/runAsUser/);
    expect(() => podmanSecurityArgs(c({ capabilities: { drop: ['NET_RAW'] } }))).toThrow(/drop/);
    expect(() => podmanSecurityArgs(c({ seccompProfile: { type: 'Localhost', localhostProfile: 'x.json' } }))).toThrow(/seccompProfile/);
    expect(() => podmanSecurityArgs({ spec: { securityContext: { runAsNonRoot: true } }, container: {} })).toThrow(/runAsNonRoot/);
    expect(podmanSecurityArgs(c({ privileged: true }))).toEqual(['--privileged']);
    expect(podmanSecurityArgs(c({ allowPrivilegeEscalation: false }))).toEqual([
      '--security-opt',
      'no-new-privileges',
      '--security-opt',
      'seccomp=unconfined',
    ]);
    expect(podmanSecurityArgs(c({}))).toEqual(['--security-opt', 'seccomp=unconfined']);
    const mount = (volume: Obj, extra: Obj = {}) => ({ mounts: [{ name: 'v', mountPath: '/m', readOnly: false, volume, ...extra }] });
    expect(podmanMountArgs(mount({ emptyDir: {} }), String)).toEqual(['--tmpfs', '/m']);
    expect(podmanMountArgs(mount({ hostPath: { path: '/h' } }, { readOnly: true }), (p) => `/x${p}`)).toEqual(['--volume', '/x/h:/m:ro']);
    expect(() => podmanMountArgs(mount({ secret: { secretName: 's' } }), String)).toThrow(
      /only hostPath, emptyDir and \(given their directory\) configMap volumes/,
    );
    expect(() => podmanMountArgs(mount({ hostPath: { path: '/h' } }, { propagation: 'Bidirectional' }), String)).toThrow(/Bidirectional/);
  });

  it('read capability names from a /proc status mask', () => {
    expect(capabilityNames('0000000000201000')).toEqual(['NET_ADMIN', 'SYS_ADMIN']);
    expect(capabilityNames('0000000000000000')).toEqual([]);
  });
});

describe("deploy/daemonset.yaml against the agent's own flags and ports", () => {
  /** The container's argv as kubelet expands it: $(VAR) from the env entries (ConfigMap keys, the node's IP). */
  async function expanded(): Promise<{ c: Obj; argv: string[]; cm: { data: Record<string, string> }; spec: Obj; ds: Obj }> {
    const all = await manifests();
    const ds = all.find((m) => m.kind === 'DaemonSet')!;
    const spec = ds.spec.template.spec;
    const c = spec.containers[0];
    const cm = await configMap();
    const vars = new Map<string, string>();
    for (const e of c.env as Obj[]) {
      const ref = e.valueFrom?.configMapKeyRef;
      if (ref) {
        expect(ref.name).toBe(cm.name);
        expect(cm.data[ref.key], `ConfigMap key ${ref.key}`).toBeDefined();
        vars.set(e.name, String(cm.data[ref.key]));
      } else if (e.valueFrom?.fieldRef?.fieldPath === 'status.hostIP') vars.set(e.name, '10.224.0.4');
      else vars.set(e.name, String(e.value));
    }
    const argv = (c.args as string[]).map((a) =>
      a.replace(/\$\((\w+)\)/g, (_m, name: string) => {
        expect(vars.has(name), `$(${name}) has an env entry`).toBe(true);
        return vars.get(name)!;
      }),
    );
    return { c, argv, cm, spec, ds };
  }

  it('passes only flags the agent takes, with values it accepts (confirmed mode and the default interval unless an operator changes them)', async () => {
    const { argv, cm } = await expanded();
    expect(argv[0]).toBe('agent');
    for (const a of argv.filter((x) => x.startsWith('--'))) expect(Object.keys(AGENT_FLAGS), a).toContain(a.slice(2));
    const { settings, install } = parseAgentArgs(argv.slice(1));
    // Leaks released once proven over the shipped window (issue 45), not only reported.
    expect(settings.gc).toMatchObject({ mode: 'confirmed', confirmAfterMs: 15 * 60_000, confirmPasses: 3 });
    expect(cm.data['gc-mode']).toBe('confirmed');
    expect(settings.intervalMs).toBe(DEFAULT_AGENT_INTERVAL_S * 1000);
    expect(install, 'the agent installs the shim (install --watch)').toBeDefined();
    expect(install!.confDir).toBe(DEFAULT_CONF_DIR);
    expect(install!.binDir).toBe(DEFAULT_CNI_PATH);
    // The cache the GC reads is under the mounted /var/lib/cni, by default.
    expect(settings.gc.cacheDir).toBe(dirname(DEFAULTS.stateDir));
  });

  it('serves Prometheus on the node address at the port the container declares, as the scrape annotations say', async () => {
    const { c, argv, ds } = await expanded();
    const { settings } = parseAgentArgs(argv.slice(1));
    expect(settings.listen.host).toBe('10.224.0.4'); // status.hostIP: Prometheus reaches it
    const port = (c.ports as Obj[]).find((p) => p.name === 'metrics')!;
    expect(port.containerPort).toBe(settings.listen.port);
    const ann = ds.spec.template.metadata.annotations;
    expect(Number(ann['prometheus.io/port'])).toBe(settings.listen.port);
    expect(ann['prometheus.io/path']).toBe('/metrics');
  });

  it("sends the kubelet's probes to the probe listener on the node's loopback, which no pod reaches (issue 45)", async () => {
    const { c, argv, spec } = await expanded();
    const { settings } = parseAgentArgs(argv.slice(1));
    // Only the node reaches 127.0.0.1 of its own namespace; the pod is in it (hostNetwork), the kubelet too.
    expect(spec.hostNetwork).toBe(true);
    expect(settings.probeListen).toEqual({ host: '127.0.0.1', port: expect.any(Number) });
    expect(settings.probeListen).not.toEqual(settings.listen);
    const ports = new Map((c.ports as Obj[]).map((p) => [p.name, p.containerPort]));
    expect(ports.get('probes')).toBe(settings.probeListen!.port);
    // Where the kubelet connects: httpGet.host (default: the pod IP, the node's, where the metrics port is) and
    // the port, by name or number.
    const target = (p: Obj) => ({ host: p.httpGet.host ?? settings.listen.host, port: ports.get(p.httpGet.port) ?? p.httpGet.port });
    for (const [name, path] of [
      ['livenessProbe', '/healthz'],
      ['readinessProbe', '/readyz'],
      // A rollout waits until the shim is installed where the runtime reads it (issue 26): /readyz, not /healthz.
      ['startupProbe', '/readyz'],
    ] as const) {
      expect(c[name].httpGet.path, name).toBe(path);
      expect(target(c[name]), name).toEqual(settings.probeListen);
    }
    expect(c.startupProbe.periodSeconds * c.startupProbe.failureThreshold).toBeGreaterThanOrEqual(300);
  });

  it('gives SIGTERM time for a release under way (one delegate call, delegateTimeoutMs)', async () => {
    const { spec, c } = await expanded();
    expect(spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(DEFAULTS.delegateTimeoutMs);
    expect(c.resources.requests.memory).toBeDefined();
    expect(c.resources.limits.memory).toBeDefined();
  });
});

describe('deploy/Containerfile', () => {
  it("ships the single executable the build writes, at the path the DaemonSet runs, with the DaemonSet's command", async () => {
    const { stages } = await containerfile();
    const final = stages.at(-1)!;
    // Each arch's image copies the SEA the build writes into dist/ for that arch (npm run image passes EXECUTABLE);
    // a plain `podman build` gets amd64's.
    const sea = (arch: string) => `dist/${SEA_TARGETS.find((t) => t.arch === arch)?.out}`;
    expect(EXECUTABLES).toEqual({ amd64: sea('x64'), arm64: sea('arm64') });
    expect(final.copies).toEqual([['$' + '{EXECUTABLE}', '/usr/local/bin/ipam-shim']]); // the build arg, expanded by podman
    expect(await readFile(join(ROOT, 'deploy/Containerfile'), 'utf8')).toContain('\nARG EXECUTABLE=dist/ipam-shim\n');
    expect(final.entrypoint).toEqual(['/usr/local/bin/ipam-shim']);
    const c = (await manifests()).find((m) => m.kind === 'DaemonSet')!.spec.template.spec.containers[0];
    expect(c.command).toEqual(final.entrypoint);
    // The image's default command is what the DaemonSet runs, minus the ConfigMap's settings.
    expect(c.args.slice(0, final.cmd!.length)).toEqual(final.cmd);
    // The build context holds only that executable.
    expect(await readFile(join(ROOT, '.containerignore'), 'utf8')).toMatch(/^\*\n!dist\/ipam-shim\n?$/m);
  });

  it('adds the executable to BASE, which defaults to the official slim image plus the same packages the mmdebstrap base holds', async () => {
    const { args, stages } = await containerfile();
    const final = stages.at(-1)!;
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the Dockerfile's build-arg reference, literally
    expect(final.from).toBe('${BASE}');
    // Nothing runs in the final stage: a base made by scripts/image/ already holds the tools (and has no apt).
    expect(final.runs).toEqual([]);
    const slim = stages.find((s) => s.name === args.get('BASE'))!;
    expect(slim, 'BASE defaults to a stage of this file').toBeDefined();
    expect(slim.from).toBe('docker.io/library/debian:12-slim');
    expect(SUITE).toBe('bookworm'); // Debian 12, like the slim image
    const installs = slim.runs.join(' ').match(/apt-get install -y --no-install-recommends ([\w.+\s-]+?)\s*(?:&&|$)/);
    expect(installs, slim.runs.join('\n')).not.toBeNull();
    expect(installs![1]!.split(/\s+/).sort()).toEqual([...TOOL_PACKAGES].sort());
    // The slim image has libstdc++6 already; the mmdebstrap base adds it for the embedded Node.js.
    expect([...BASE_PACKAGES].sort()).toEqual([...TOOL_PACKAGES, 'libstdc++6'].sort());
    for (const tool of ['iproute2', 'ebtables', 'nftables', 'iptables']) expect(TOOL_PACKAGES).toContain(tool);
  });
});
