// deploy/ against the code: the DaemonSet mounts every host path the shim uses by default, at the same path
// inside the container (so no flag has to repeat a default), runs `install --watch` with the executable the
// Containerfile ships, and its shim config passes the plugin's own schema.
import { describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ShimSettingsSchema } from '../../src/cni/config.js';
import { DEFAULT_CONF_DIR } from '../../src/conflist.js';
import { DEFAULT_CNI_PATH } from '../../src/network/open.js';
import { HOST_LOCAL_DEFAULT_DATA_DIR } from '../../src/effects/host-local-store.js';
import { parseShimConfig } from '../../src/cli/install.js';
import { AGENT_FLAGS, DEFAULT_AGENT_INTERVAL_S, parseAgentArgs } from '../../src/cli/agent.js';
import { BASE_PACKAGES, SUITE, TOOL_PACKAGES } from '../../scripts/image/base.js';
import { DEFAULT_CACHE_DIR } from '../../src/gc/from-cache.js';

const ROOT = resolve(import.meta.dirname, '../..');
const DEFAULTS = ShimSettingsSchema.parse({});
/** Where `ip netns` (and the agent-IP code) keep named namespaces. */
const NETNS_DIR = '/run/netns';

type Obj = Record<string, any>;

async function manifests(): Promise<Obj[]> {
  const docs = parseAllDocuments(await readFile(join(ROOT, 'deploy/daemonset.yaml'), 'utf8'));
  for (const d of docs) expect(d.errors, String(d.errors)).toEqual([]);
  return docs.map((d) => d.toJS() as Obj);
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
  it('is a hostNetwork, privileged DaemonSet whose container runs the node agent', async () => {
    const ds = (await manifests()).find((m) => m.kind === 'DaemonSet')!;
    expect(ds).toBeDefined();
    const spec = ds.spec.template.spec;
    expect(spec.hostNetwork).toBe(true);
    expect(spec.containers).toHaveLength(1);
    const c = spec.containers[0];
    expect(c.securityContext.privileged).toBe(true);
    const argv = [...(c.command ?? []), ...(c.args ?? [])];
    expect(argv[1]).toBe('agent');
    // Defaults, not flags: the mounts put the host paths where the code looks by default.
    expect(argv).not.toContain('--cni-bin-dir');
    expect(argv).not.toContain('--conf-dir');
    expect(ds.spec.selector.matchLabels).toEqual(ds.spec.template.metadata.labels);
  });

  it('mounts each host path at the same path, covering every default the shim uses', async () => {
    const spec = (await manifests()).find((m) => m.kind === 'DaemonSet')!.spec.template.spec;
    const volumes = new Map<string, Obj>(spec.volumes.map((v: Obj) => [v.name, v]));
    const mounts: Obj[] = spec.containers[0].volumeMounts;
    for (const m of mounts) {
      const v = volumes.get(m.name);
      expect(v?.hostPath?.path, m.name).toBe(m.mountPath);
      expect(m.readOnly ?? false, m.name).toBe(false);
    }
    const mounted = mounts.map((m) => m.mountPath as string);
    const covered = (path: string) => mounted.some((p) => path === p || path.startsWith(`${p}/`));
    // gc's default cache dir too: a cache out of sight makes gc refuse (docs/failure-model.md).
    for (const path of [DEFAULT_CNI_PATH, DEFAULT_CONF_DIR, DEFAULTS.stateDir, DEFAULTS.logFile, HOST_LOCAL_DEFAULT_DATA_DIR, NETNS_DIR, `${DEFAULT_CACHE_DIR}/results`]) {
      expect(covered(path), path).toBe(true);
    }
    // Exactly the five the issue names, nothing broader (no / or /var).
    expect(mounted.sort()).toEqual([DEFAULT_CNI_PATH, DEFAULT_CONF_DIR, dirname(DEFAULTS.stateDir), dirname(DEFAULTS.logFile), NETNS_DIR].sort());
    expect(mounts.find((m) => m.mountPath === NETNS_DIR)!.mountPropagation).toBe('HostToContainer');
  });

  it('passes a shim config that the plugin schema accepts', async () => {
    const all = await manifests();
    const c = all.find((m) => m.kind === 'DaemonSet')!.spec.template.spec.containers[0];
    const ref = c.env.find((e: Obj) => e.name === 'SHIM_CONFIG').valueFrom.configMapKeyRef;
    expect(c.args).toContain('$(SHIM_CONFIG)');
    const cm = all.find((m) => m.kind === 'ConfigMap' && m.metadata.name === ref.name)!;
    expect(cm.metadata.namespace).toBe(all.find((m) => m.kind === 'DaemonSet')!.metadata.namespace);
    expect(() => parseShimConfig(cm.data[ref.key])).not.toThrow();
  });
});

describe("deploy/daemonset.yaml against the agent's own flags and ports", () => {
  /** The container's argv as kubelet expands it: $(VAR) from the env entries (ConfigMap keys, the node's IP). */
  async function expanded(): Promise<{ c: Obj; argv: string[]; cm: Obj; spec: Obj; ds: Obj }> {
    const all = await manifests();
    const ds = all.find((m) => m.kind === 'DaemonSet')!;
    const spec = ds.spec.template.spec;
    const c = spec.containers[0];
    const vars = new Map<string, string>();
    for (const e of c.env as Obj[]) {
      const ref = e.valueFrom?.configMapKeyRef;
      if (ref) {
        const cm = all.find((m) => m.kind === 'ConfigMap' && m.metadata.name === ref.name)!;
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
    const cm = all.find((m) => m.kind === 'ConfigMap')!;
    return { c, argv, cm, spec, ds };
  }

  it("passes only flags the agent takes, with values it accepts (report mode and the default interval unless an operator changes them)", async () => {
    const { argv, cm } = await expanded();
    expect(argv[0]).toBe('agent');
    for (const a of argv.filter((x) => x.startsWith('--'))) expect(Object.keys(AGENT_FLAGS), a).toContain(a.slice(2));
    const { settings, install } = parseAgentArgs(argv.slice(1));
    expect(settings.gc.mode).toBe('report');
    expect(cm.data['gc-mode']).toBe('report');
    expect(settings.intervalMs).toBe(DEFAULT_AGENT_INTERVAL_S * 1000);
    expect(install, 'the agent installs the shim (install --watch)').toBeDefined();
    expect(install!.confDir).toBe(DEFAULT_CONF_DIR);
    expect(install!.binDir).toBe(DEFAULT_CNI_PATH);
    // The cache the GC reads is under the mounted /var/lib/cni, by default.
    expect(settings.gc.cacheDir).toBe(dirname(DEFAULTS.stateDir));
  });

  it('listens on the node address at the port the container declares, which the probes and the scrape annotations use', async () => {
    const { c, argv, ds } = await expanded();
    const { settings } = parseAgentArgs(argv.slice(1));
    expect(settings.listen.host).toBe('10.224.0.4'); // status.hostIP: kubelet's probes and Prometheus reach it
    const port = (c.ports as Obj[]).find((p) => p.name === 'metrics')!;
    expect(port.containerPort).toBe(settings.listen.port);
    const probePort = (p: Obj) => (p.httpGet.port === port.name ? port.containerPort : p.httpGet.port);
    expect(c.livenessProbe.httpGet.path).toBe('/healthz');
    expect(probePort(c.livenessProbe)).toBe(settings.listen.port);
    expect(c.readinessProbe.httpGet.path).toBe('/readyz');
    expect(probePort(c.readinessProbe)).toBe(settings.listen.port);
    // A rollout waits until the shim is installed where the runtime reads it (issue 26): /readyz, not /healthz.
    expect(c.startupProbe.httpGet.path).toBe('/readyz');
    expect(probePort(c.startupProbe)).toBe(settings.listen.port);
    expect(c.startupProbe.periodSeconds * c.startupProbe.failureThreshold).toBeGreaterThanOrEqual(300);
    expect(c.livenessProbe.httpGet.host).toBeUndefined(); // the pod IP: the node's, where the agent listens
    const ann = ds.spec.template.metadata.annotations;
    expect(Number(ann['prometheus.io/port'])).toBe(settings.listen.port);
    expect(ann['prometheus.io/path']).toBe('/metrics');
  });

  it('gives SIGTERM time for a release under way (one delegate call, delegateTimeoutMs)', async () => {
    const { spec, c } = await expanded();
    expect(spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(DEFAULTS.delegateTimeoutMs);
    expect(c.resources.requests.memory).toBeDefined();
    expect(c.resources.limits.memory).toBeDefined();
  });
});

describe('deploy/Containerfile', () => {
  it('ships the single executable the build writes, at the path the DaemonSet runs, with the DaemonSet\'s command', async () => {
    const { stages } = await containerfile();
    const final = stages.at(-1)!;
    const build = await readFile(join(ROOT, 'scripts/build.mjs'), 'utf8');
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the build script's own source text is what is checked
    expect(build).toContain('`${finalDist}ipam-shim`'); // the SEA the build renames into dist/
    expect(final.copies).toEqual([['dist/ipam-shim', '/usr/local/bin/ipam-shim']]);
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
