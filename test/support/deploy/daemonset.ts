// deploy/ as the tests read it: the DaemonSet's agent container and volumes, the ConfigMap the kustomization
// generates (kubectl-free: the generator's files and literals, without the hash suffix), and the `podman run` flags
// that give a container exactly the DaemonSet's security settings and host mounts. The image and whole-node tests
// run the agent with those flags, so the manifest and what the tests prove cannot drift apart: a securityContext
// field or a volume kind this file does not know how to mirror fails the test instead of being left out.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { join, resolve } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { ROOT } from '../../../scripts/image/build-image.js';

type Obj = Record<string, any>;
const execFileP = promisify(execFile);

/** What Kubernetes' `seccompProfile: {type: RuntimeDefault}` means under podman: its default profile (containers.conf `seccomp_profile`). */
export const PODMAN_DEFAULT_SECCOMP = '/usr/share/containers/seccomp.json';

/** Every document of a YAML file under deploy/, parse errors failing. */
export async function deployDocs(file: string): Promise<Obj[]> {
  const docs = parseAllDocuments(await readFile(join(ROOT, 'deploy', file), 'utf8'));
  for (const d of docs) if (d.errors.length > 0) throw new Error(`deploy/${file}: ${d.errors.join('; ')}`);
  return docs.map((d) => d.toJS() as Obj);
}

export interface DaemonSetView {
  ds: Obj;
  spec: Obj;
  container: Obj;
  /** volumeMounts joined with their volumes. */
  mounts: Array<{ name: string; mountPath: string; readOnly: boolean; propagation?: string; volume: Obj }>;
}

export async function daemonSet(): Promise<DaemonSetView> {
  const ds = (await deployDocs('daemonset.yaml')).find((d) => d.kind === 'DaemonSet');
  if (!ds) throw new Error('deploy/daemonset.yaml: no DaemonSet');
  if (ds.spec.template.spec.containers.length !== 1) throw new Error('deploy/daemonset.yaml: one container expected');
  return daemonSetView(ds);
}

/** A DaemonSet's pod spec with one of its containers (the first, or the named one, init containers included). */
export function daemonSetView(ds: Obj, containerName?: string): DaemonSetView {
  const spec = ds.spec.template.spec;
  const all = [...(spec.initContainers ?? []), ...spec.containers] as Obj[];
  const container = containerName === undefined ? spec.containers[0] : all.find((c) => c.name === containerName);
  if (!container) throw new Error(`DaemonSet ${ds.metadata?.name}: no container ${containerName}`);
  const volumes = new Map<string, Obj>((spec.volumes ?? []).map((v: Obj) => [v.name, v]));
  const mounts = (container.volumeMounts ?? []).map((m: Obj) => {
    const volume = volumes.get(m.name);
    if (!volume) throw new Error(`DaemonSet ${ds.metadata?.name}: volumeMount ${m.name} has no volume`);
    return {
      name: m.name,
      mountPath: m.mountPath,
      readOnly: m.readOnly ?? false,
      ...(m.mountPropagation ? { propagation: m.mountPropagation } : {}),
      volume,
    };
  });
  return { ds, spec, container, mounts };
}

/**
 * kubectl for `kubectl kustomize` (Kubernetes 1.36 from Debian unstable, unpacked by scripts/install-deps.sh into
 * .deps/kubectl-1.36; KUBECTL overrides), or undefined when there is none.
 */
export function kubectlBin(): string | undefined {
  const candidates = [process.env.KUBECTL, join(ROOT, '.deps/kubectl-1.36/kubectl')].filter((c): c is string => Boolean(c));
  return candidates.find((c) => existsSync(c));
}

/** `kubectl kustomize DIR` (DIR relative to the repository, or absolute): the rendered objects. */
export async function renderKustomization(dir: string): Promise<Obj[]> {
  const kubectl = kubectlBin();
  if (!kubectl) throw new Error('no kubectl: run scripts/install-deps.sh (or set KUBECTL)');
  const { stdout } = await execFileP(kubectl, ['kustomize', resolve(ROOT, dir)], { maxBuffer: 16 << 20 });
  const docs = parseAllDocuments(stdout);
  for (const d of docs) if (d.errors.length > 0) throw new Error(`kubectl kustomize ${dir}: ${d.errors.join('; ')}`);
  return docs.map((d) => d.toJS() as Obj);
}

/**
 * A container's command line as the kubelet starts it: command + args, each `$(VAR)` replaced from the container's
 * env (a value, a key of one of `configMaps` by its rendered name, or the node's address for status.hostIP).
 */
export function commandLine(container: Obj, configMaps: Obj[], hostIP: string): string[] {
  const env = new Map<string, string>();
  for (const e of (container.env ?? []) as Obj[]) {
    if (e.value !== undefined) env.set(e.name, String(e.value));
    else if (e.valueFrom?.configMapKeyRef) {
      const ref = e.valueFrom.configMapKeyRef;
      const cm = configMaps.find((c) => c.metadata.name === ref.name);
      const v = cm?.data?.[ref.key];
      if (v === undefined) throw new Error(`env ${e.name}: ConfigMap ${ref.name} has no key ${ref.key}`);
      env.set(e.name, v);
    } else if (e.valueFrom?.fieldRef?.fieldPath === 'status.hostIP') env.set(e.name, hostIP);
    else throw new Error(`env ${e.name}: not mirrored under podman`);
  }
  const expand = (a: string) => a.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name: string) => env.get(name) ?? m);
  return [...((container.command ?? []) as string[]), ...((container.args ?? []) as string[])].map(expand);
}

export interface GeneratedConfigMap {
  name: string;
  namespace: string | undefined;
  labels: Record<string, string>;
  data: Record<string, string>;
  /** The generator's options (disableNameSuffixHash, labels, …). */
  options: Obj;
}

/** deploy/kustomization.yaml and the ConfigMaps its configMapGenerator makes (names without the hash suffix). */
export async function kustomization(): Promise<{ k: Obj; configMaps: GeneratedConfigMap[] }> {
  const k = parse(await readFile(join(ROOT, 'deploy/kustomization.yaml'), 'utf8')) as Obj;
  const configMaps: GeneratedConfigMap[] = [];
  for (const g of (k.configMapGenerator ?? []) as Obj[]) {
    const data: Record<string, string> = {};
    for (const f of (g.files ?? []) as string[]) {
      // `key=path` or `path` (the key is the file's name), as kustomize reads them.
      const [key, file] = f.includes('=') ? [f.slice(0, f.indexOf('=')), f.slice(f.indexOf('=') + 1)] : [f.split('/').pop()!, f];
      data[key] = await readFile(join(ROOT, 'deploy', file), 'utf8');
    }
    for (const l of (g.literals ?? []) as string[]) {
      const eq = l.indexOf('=');
      if (eq <= 0) throw new Error(`deploy/kustomization.yaml: literal ${l} is not key=value`);
      data[l.slice(0, eq)] = l.slice(eq + 1);
    }
    configMaps.push({ name: g.name, namespace: g.namespace ?? k.namespace, labels: g.options?.labels ?? {}, data, options: g.options ?? {} });
  }
  return { k, configMaps };
}

const seccompArgs = (p: Obj): string[] => {
  if (p.type === 'RuntimeDefault') return ['--security-opt', `seccomp=${PODMAN_DEFAULT_SECCOMP}`];
  if (p.type === 'Unconfined') return ['--security-opt', 'seccomp=unconfined'];
  throw new Error(`seccompProfile ${JSON.stringify(p)}: not mirrored under podman`);
};

/**
 * The `podman run` flags for the container's securityContext (and the pod's seccomp profile when the container sets
 * none). Kubernetes' readOnlyRootFilesystem adds no tmpfs, so neither does this (podman's --read-only would add
 * /tmp, /run and /var/tmp by itself).
 */
export function podmanSecurityArgs(view: Pick<DaemonSetView, 'spec' | 'container'>): string[] {
  const sc: Obj = view.container.securityContext ?? {};
  const args: string[] = [];
  for (const [key, value] of Object.entries(sc)) {
    if (key === 'privileged') args.push(...(value ? ['--privileged'] : []));
    else if (key === 'capabilities') {
      const drop = (value.drop ?? []) as string[];
      if (drop.some((c) => c !== 'ALL')) throw new Error(`capabilities.drop ${drop.join(',')}: only ALL is mirrored`);
      args.push(...(drop.includes('ALL') ? ['--cap-drop=ALL'] : []), ...((value.add ?? []) as string[]).map((c) => `--cap-add=${c}`));
    } else if (key === 'seccompProfile') args.push(...seccompArgs(value));
    else if (key === 'readOnlyRootFilesystem') args.push(...(value ? ['--read-only', '--read-only-tmpfs=false'] : []));
    else if (key === 'allowPrivilegeEscalation') args.push(...(value === false ? ['--security-opt', 'no-new-privileges'] : []));
    else throw new Error(`securityContext.${key}: not mirrored under podman`);
  }
  if (!sc.seccompProfile && view.spec.securityContext?.seccompProfile) args.push(...seccompArgs(view.spec.securityContext.seccompProfile));
  for (const key of Object.keys(view.spec.securityContext ?? {}))
    if (key !== 'seccompProfile') throw new Error(`pod securityContext.${key}: not mirrored under podman`);
  // podman applies its default profile unless told otherwise; Kubernetes runs Unconfined when nothing is set.
  if (!args.some((a) => a.startsWith('seccomp=')) && !args.includes('--privileged')) args.push('--security-opt', 'seccomp=unconfined');
  return args;
}

/**
 * `--volume`/`--tmpfs` flags for the DaemonSet's volumes: each hostPath from `hostDir(hostPath)` (where the test
 * keeps what stands for that node path) at its mountPath, with the mount's propagation and read-only flag; each
 * emptyDir a tmpfs; each configMap volume `configMapDir(name)`, read-only. Another kind of volume fails.
 */
export function podmanMountArgs(
  view: Pick<DaemonSetView, 'mounts'>,
  hostDir: (hostPath: string) => string,
  /** A configMap volume: the directory standing for the kubelet's projection of it (test/support/doubles/cilium-cni-writer.ts). */
  configMapDir?: (name: string) => string,
): string[] {
  return view.mounts.flatMap((m) => {
    const opts = [
      ...(m.readOnly ? ['ro'] : []),
      ...(m.propagation === 'HostToContainer' ? ['rslave'] : m.propagation ? [`unmirrored-${m.propagation}`] : []),
    ];
    if (opts.some((o) => o.startsWith('unmirrored-'))) throw new Error(`mountPropagation ${m.propagation} of ${m.name}: not mirrored under podman`);
    if (m.volume.hostPath) return ['--volume', `${hostDir(m.volume.hostPath.path)}:${m.mountPath}${opts.length ? `:${opts.join(',')}` : ''}`];
    if (m.volume.emptyDir) return ['--tmpfs', `${m.mountPath}${m.readOnly ? ':ro' : ''}`];
    // The kubelet mounts a configMap volume read-only whatever the mount says.
    if (m.volume.configMap && configMapDir) return ['--volume', `${configMapDir(m.volume.configMap.name)}:${m.mountPath}:ro`];
    throw new Error(`volume ${m.name}: only hostPath, emptyDir and (given their directory) configMap volumes are mirrored under podman`);
  });
}

/** Linux capability numbers (linux/capability.h), for reading a process's CapEff. */
const CAPABILITIES = [
  'CHOWN',
  'DAC_OVERRIDE',
  'DAC_READ_SEARCH',
  'FOWNER',
  'FSETID',
  'KILL',
  'SETGID',
  'SETUID',
  'SETPCAP',
  'LINUX_IMMUTABLE',
  'NET_BIND_SERVICE',
  'NET_BROADCAST',
  'NET_ADMIN',
  'NET_RAW',
  'IPC_LOCK',
  'IPC_OWNER',
  'SYS_MODULE',
  'SYS_RAWIO',
  'SYS_CHROOT',
  'SYS_PTRACE',
  'SYS_PACCT',
  'SYS_ADMIN',
  'SYS_BOOT',
  'SYS_NICE',
  'SYS_RESOURCE',
  'SYS_TIME',
  'SYS_TTY_CONFIG',
  'MKNOD',
  'LEASE',
  'AUDIT_WRITE',
  'AUDIT_CONTROL',
  'SETFCAP',
  'MAC_OVERRIDE',
  'MAC_ADMIN',
  'SYSLOG',
  'WAKE_ALARM',
  'BLOCK_SUSPEND',
  'AUDIT_READ',
  'PERFMON',
  'BPF',
  'CHECKPOINT_RESTORE',
];

/** The capability names in a /proc/<pid>/status mask (e.g. CapEff's hex), sorted. */
export function capabilityNames(hexMask: string): string[] {
  const mask = BigInt(`0x${hexMask}`);
  return CAPABILITIES.filter((_, bit) => (mask >> BigInt(bit)) & 1n).sort();
}
