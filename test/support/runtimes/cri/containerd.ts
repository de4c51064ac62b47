// Which containerd the CRI bed runs, and its config. CONTAINERD_BIN_DIR names a directory holding containerd,
// containerd-shim-runc-v2 and ctr of one build (install-deps publishes Debian unstable's 2.x at .deps/containerd-2);
// without it the bed runs the system's (Debian 12: 1.6). The config's format follows the build's major version:
// 1.x reads version 2 (CRI under io.containerd.grpc.v1.cri), 2.x version 3 (CRI split into
// io.containerd.cri.v1.runtime and io.containerd.cri.v1.images; the grpc plugin keeps only the stream server).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

export interface ContainerdBuild {
  /** The directory holding containerd, containerd-shim-runc-v2 and ctr. */
  binDir: string;
  containerd: string;
  ctr: string;
  /** `containerd --version`'s version, e.g. 1.6.20~ds1 or 2.1.9+unknown. */
  version: string;
  major: number;
  minor: number;
}

/** What the bed's containerd config names. */
export interface ContainerdConfigDirs {
  baseDir: string;
  socket: string;
  binDir: string;
  confDir: string;
  sandboxImage: string;
}

const SYSTEM_BIN_DIR = '/usr/bin';
const TOOLS = ['containerd', 'containerd-shim-runc-v2', 'ctr'];

/** CONTAINERD_BIN_DIR (relative to the working directory) or the system's. */
export function containerdBinDir(): string {
  const dir = process.env.CONTAINERD_BIN_DIR;
  return dir ? path.resolve(dir) : SYSTEM_BIN_DIR;
}

/** Missing pieces of the build in `binDir` (empty when all three are there). */
export function missingTools(binDir = containerdBinDir()): string[] {
  return TOOLS.map((t) => path.join(binDir, t)).filter((f) => !existsSync(f));
}

const builds = new Map<string, ContainerdBuild>();

/** The build in `binDir`, its version read from `containerd --version` (once per directory). */
export function containerdBuild(binDir = containerdBinDir()): ContainerdBuild {
  const known = builds.get(binDir);
  if (known) return known;
  const containerd = path.join(binDir, 'containerd');
  const out = execFileSync(containerd, ['--version'], { encoding: 'utf8' });
  // "containerd github.com/containerd/containerd/v2 2.1.9+unknown" / "containerd github.com/containerd/containerd 1.6.20~ds1 …"
  const m = /\s(v?(\d+)\.(\d+)\.\d+\S*)/.exec(out);
  if (!m) throw new Error(`cannot read the version of ${containerd}: ${out.trim()}`);
  const build = { binDir, containerd, ctr: path.join(binDir, 'ctr'), version: m[1]!.replace(/^v/, ''), major: Number(m[2]), minor: Number(m[3]) };
  builds.set(binDir, build);
  return build;
}

/**
 * The bed's environment for containerd: a node's PATH (nothing else from the test process), with the build's own
 * directory first so containerd starts its own containerd-shim-runc-v2 (it looks the shim up on PATH).
 */
export function nodeEnv(build: ContainerdBuild): { PATH: string } {
  const system = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
  return { PATH: build.binDir === SYSTEM_BIN_DIR ? system : `${build.binDir}:${system}` };
}

const q = (s: string) => JSON.stringify(s);

/**
 * The config for `build`. Shared by both formats: private root/state/sockets, debug logging (the CNI conf syncer
 * logs its reloads only at that level; setConfList waits for one), no metrics listener, restrict_oom_score_adj
 * (no CAP_SYS_RESOURCE here), cgroupfs with a private runc root, one CNI bin dir, one conflist.
 */
export function containerdConfig(build: ContainerdBuild, d: ContainerdConfigDirs): string {
  const common = [
    `root = ${q(path.join(d.baseDir, 'root'))}`,
    `state = ${q(path.join(d.baseDir, 'state'))}`,
    '[grpc]',
    `  address = ${q(d.socket)}`,
    '[ttrpc]',
    `  address = ${q(`${d.socket}.ttrpc`)}`,
    '[debug]',
    '  level = "debug"',
    '[metrics]',
    '  address = ""',
  ];
  const runtime = (prefix: string, extra: string[] = []) => [
    `[${prefix}.containerd]`,
    ...extra,
    '  default_runtime_name = "runc"',
    `[${prefix}.containerd.runtimes.runc]`,
    '  runtime_type = "io.containerd.runc.v2"',
    `[${prefix}.containerd.runtimes.runc.options]`,
    '  SystemdCgroup = false',
    `  Root = ${q(path.join(d.baseDir, 'runc'))}`,
  ];
  const sandboxSettings = [
    '  enable_selinux = false',
    '  disable_apparmor = true',
    '  restrict_oom_score_adj = true',
    '  netns_mounts_under_state_dir = false',
  ];
  if (build.major < 2) {
    const cri = '[plugins."io.containerd.grpc.v1.cri"]';
    return [
      'version = 2',
      ...common,
      cri,
      `  sandbox_image = ${q(d.sandboxImage)}`,
      '  stream_server_address = "127.0.0.1"',
      '  stream_server_port = "0"',
      ...sandboxSettings,
      // 1.6 takes one bin_dir ("a:b" is not split)
      '[plugins."io.containerd.grpc.v1.cri".cni]',
      `  bin_dir = ${q(d.binDir)}`,
      `  conf_dir = ${q(d.confDir)}`,
      '  max_conf_num = 1',
      ...runtime('plugins."io.containerd.grpc.v1.cri"', ['  snapshotter = "overlayfs"']),
      '',
    ].join('\n');
  }
  const rt = "plugins.'io.containerd.cri.v1.runtime'";
  return [
    'version = 3',
    ...common,
    "[plugins.'io.containerd.cri.v1.images']",
    '  snapshotter = "overlayfs"',
    "[plugins.'io.containerd.cri.v1.images'.pinned_images]",
    `  sandbox = ${q(d.sandboxImage)}`,
    `[${rt}]`,
    ...sandboxSettings,
    '  enable_cdi = false',
    `[${rt}.cni]`,
    `  bin_dirs = [${q(d.binDir)}]`,
    `  conf_dir = ${q(d.confDir)}`,
    '  max_conf_num = 1',
    ...runtime(rt),
    "[plugins.'io.containerd.grpc.v1.cri']",
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
    // NRI's socket (/var/run/nri/nri.sock) and the opt plugin's /opt/containerd are node-wide paths: a bed keeps
    // to its own dir.
    "[plugins.'io.containerd.nri.v1.nri']",
    '  disable = true',
    "[plugins.'io.containerd.internal.v1.opt']",
    `  path = ${q(path.join(d.baseDir, 'opt'))}`,
    '',
  ].join('\n');
}
