// Real containers from podman 4.3 (Debian) on its CNI backend, isolated from the machine's podman state, for
// tests that need a real runtime to send ADD (on start) and DEL (on stop/rm) through libcni 1.1.2.
//
// What podman needed here (root in a sandbox without CAP_SYS_RESOURCE, cgroup v1, no systemd, no journald):
// - CONTAINERS_CONF → a private containers.conf: `network_backend = "cni"` (the default here is netavark),
//   `cni_plugin_dirs`, `network_config_dir` (a temp dir holding only our conflist), `default_ulimits = []`
//   (otherwise runc fails: "error setting rlimit type 7: operation not permitted"), runtime runc,
//   cgroup_manager cgroupfs, events_logger file, a private tmp_dir and lock_type "file" (so the file locks live in
//   our tmp_dir instead of the machine-wide SHM lock segment another podman store may be using).
// - `--root`/`--runroot` in a temp dir and `--storage-driver vfs`; `--rootfs` a directory with busybox-static
//   (no image pull, no registry); `--stop-signal KILL` so `stop` does not wait out sleep's ignored SIGTERM.
// - Not configurable in podman 4.3: libcni's result cache (/var/lib/cni/results/<network>-<id>-<ifname>) and the
//   netns (/run/netns/netns-<uuid>). Network names are unique per bed, and cleanup() removes leftovers of ours.
import { execa, type Result } from 'execa';
import { existsSync } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { uid } from '../net/netns.js';
import { unmountBelow } from './mounts.js';
import { teardown } from '../teardown.js';

/** containers.conf's default `conmon_env_vars` PATH (podman 4.3). */
const CONMON_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export const BUSYBOX_APPLETS = [
  'sh',
  'ip',
  'ping',
  'ping6',
  'sleep',
  'cat',
  'ls',
  'ps',
  'echo',
  'ifconfig',
  'route',
  'hostname',
  'true',
  'false',
  'wget',
  'nc',
  'sysctl',
  'mount',
];

export interface PodmanBedDirs {
  /** Everything of this bed lives below it (removed by cleanup). */
  baseDir: string;
  /** A fresh directory for host-local's `dataDir` (or anything else the conflist needs). */
  dataDir: string;
  /** The network name to use (unique per bed; used when the conflist has none). */
  network: string;
}

export interface PodmanBedOptions {
  /** The conflist; a function gets the bed's directories (e.g. to put host-local's dataDir inside). */
  confList: Record<string, unknown> | ((dirs: PodmanBedDirs) => Record<string, unknown>);
  /** CNI_PATH for podman; default ['/usr/lib/cni']. */
  pluginDirs?: string[];
  /** Busybox binary to install into the rootfs; default /bin/busybox (busybox-static). */
  busybox?: string;
  /** Extra lines for containers.conf sections. */
  extraConf?: { containers?: string[]; network?: string[]; engine?: string[] };
  /** Extra environment for podman (and so for the plugins it runs). */
  env?: Record<string, string>;
  /** Per podman command; default 60 s. */
  timeoutMs?: number;
  /** Parent for the temp dir; default os.tmpdir(). */
  tmpParent?: string;
  /** Run podman (and so the CNI plugins it runs) in this named netns (`nsenter --net`, host mount namespace). */
  netns?: string;
}

export interface StartOptions {
  /** Command to run; default ['sleep', '3600']. */
  command?: string[];
  /** Extra `podman run` arguments (e.g. ['--ip', '10.1.2.3']). */
  runArgs?: string[];
  /** Network to attach; default the bed's conflist. */
  network?: string;
}

export class PodmanBed {
  readonly network: string;
  readonly baseDir: string;
  readonly rootfs: string;
  readonly netConfDir: string;
  readonly dataDir: string;
  readonly confListPath: string;
  readonly containersConf: string;
  readonly confList: Record<string, unknown>;
  private readonly root: string;
  private readonly runroot: string;
  private readonly tmpDir: string;
  private readonly env: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly netns: string | undefined;
  /** Netns paths of containers we started (deleted by cleanup if podman left them behind). */
  private readonly netnsPaths = new Set<string>();
  private readonly containerIds = new Set<string>();

  private constructor(p: {
    network: string;
    baseDir: string;
    confList: Record<string, unknown>;
    env: Record<string, string>;
    timeoutMs: number;
    netns?: string | undefined;
  }) {
    this.network = p.network;
    this.baseDir = p.baseDir;
    this.confList = p.confList;
    this.rootfs = path.join(p.baseDir, 'rootfs');
    this.netConfDir = path.join(p.baseDir, 'net.d');
    this.dataDir = path.join(p.baseDir, 'data');
    this.confListPath = path.join(this.netConfDir, `50-${p.network}.conflist`);
    this.containersConf = path.join(p.baseDir, 'containers.conf');
    this.root = path.join(p.baseDir, 'root');
    this.runroot = path.join(p.baseDir, 'runroot');
    this.tmpDir = path.join(p.baseDir, 'tmp');
    this.env = p.env;
    this.timeoutMs = p.timeoutMs;
    this.netns = p.netns;
  }

  /** Creates the temp dirs, rootfs, containers.conf and conflist. Call cleanup() afterwards in any case. */
  static async create(opts: PodmanBedOptions): Promise<PodmanBed> {
    const baseDir = await mkdtemp(path.join(opts.tmpParent ?? os.tmpdir(), 'podman-bed-'));
    const dirs: PodmanBedDirs = { baseDir, dataDir: path.join(baseDir, 'data'), network: `pb-${uid(8)}` };
    try {
      const raw = typeof opts.confList === 'function' ? opts.confList(dirs) : opts.confList;
      const confList = { ...raw, name: typeof raw.name === 'string' ? raw.name : dirs.network };
      const bed = new PodmanBed({
        network: confList.name as string,
        baseDir,
        confList,
        env: opts.env ?? {},
        timeoutMs: opts.timeoutMs ?? 60_000,
        netns: opts.netns,
      });
      await bed.setup(opts);
      return bed;
    } catch (e) {
      await rm(baseDir, { recursive: true, force: true }).catch(() => undefined);
      throw e;
    }
  }

  private async setup(opts: PodmanBedOptions): Promise<void> {
    for (const d of [this.netConfDir, this.dataDir, this.root, this.runroot, this.tmpDir]) await mkdir(d, { recursive: true, mode: 0o700 });
    // rootfs: busybox-static and its applets
    for (const d of ['bin', 'etc', 'proc', 'sys', 'dev', 'tmp', 'run', 'root']) await mkdir(path.join(this.rootfs, d), { recursive: true });
    await chmod(this.rootfs, 0o755);
    await copyFile(opts.busybox ?? '/bin/busybox', path.join(this.rootfs, 'bin', 'busybox'));
    await chmod(path.join(this.rootfs, 'bin', 'busybox'), 0o755);
    for (const a of BUSYBOX_APPLETS) await symlink('busybox', path.join(this.rootfs, 'bin', a));
    await writeFile(path.join(this.rootfs, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
    await writeFile(path.join(this.rootfs, 'etc', 'group'), 'root:x:0:\n');

    await writeFile(this.confListPath, `${JSON.stringify(this.confList, null, 2)}\n`);
    const q = (s: string) => JSON.stringify(s);
    const extra = opts.extraConf ?? {};
    const conf = [
      '[containers]',
      'default_ulimits = []',
      ...(extra.containers ?? []),
      '',
      '[network]',
      'network_backend = "cni"',
      `cni_plugin_dirs = [${(opts.pluginDirs ?? ['/usr/lib/cni']).map(q).join(', ')}]`,
      `network_config_dir = ${q(this.netConfDir)}`,
      ...(extra.network ?? []),
      '',
      '[engine]',
      // conmon starts the cleanup process that may run the network teardown (`podman rm -f` races it) with only
      // these variables: the bed's env must reach the plugins there too, or a DEL runs without it (cilium-cni's
      // stand-in without CILIUM_SOCK: 999 after its wait, the address kept).
      ...(Object.keys(this.env).length
        ? [`conmon_env_vars = [${[`PATH=${CONMON_PATH}`, ...Object.entries(this.env).map(([k, v]) => `${k}=${v}`)].map(q).join(', ')}]`]
        : []),
      'runtime = "runc"',
      'cgroup_manager = "cgroupfs"',
      'events_logger = "file"',
      `tmp_dir = ${q(this.tmpDir)}`,
      'lock_type = "file"',
      ...(extra.engine ?? []),
      '',
    ].join('\n');
    await writeFile(this.containersConf, conf);
  }

  /** Runs podman against this bed's private store and config. */
  async podman(args: string[], opts: { reject?: boolean; input?: string; timeoutMs?: number } = {}): Promise<Result<{ reject: false }>> {
    const ns = this.netns ? [`--net=/run/netns/${this.netns}`, 'podman'] : [];
    const r = await execa(
      this.netns ? 'nsenter' : 'podman',
      [...ns, '--root', this.root, '--runroot', this.runroot, '--storage-driver', 'vfs', ...args],
      {
        env: { ...this.env, CONTAINERS_CONF: this.containersConf },
        input: opts.input ?? '',
        reject: false,
        timeout: opts.timeoutMs ?? this.timeoutMs,
        killSignal: 'SIGKILL',
      },
    );
    if ((opts.reject ?? true) && (r.failed || r.exitCode !== 0)) {
      throw new Error(
        `podman ${args.join(' ')} failed (exit ${r.exitCode ?? 'signal'}${r.timedOut ? ', timed out' : ''}): ${String(r.stderr).trim() || String(r.stdout).trim()}`,
      );
    }
    return r;
  }

  /** `podman run -d` from the busybox rootfs on this bed's network. Returns the container ID and its netns. */
  async startContainer(name: string, opts: StartOptions = {}): Promise<{ id: string; netnsPath: string }> {
    const r = await this.podman([
      'run',
      '-d',
      '--name',
      name,
      '--network',
      opts.network ?? this.network,
      '--stop-signal',
      'KILL',
      ...(opts.runArgs ?? []),
      '--rootfs',
      this.rootfs,
      ...(opts.command ?? ['sleep', '3600']),
    ]);
    const id = String(r.stdout).trim().split('\n').pop() ?? '';
    this.containerIds.add(id);
    const netnsPath = await this.netnsPath(name);
    if (netnsPath) this.netnsPaths.add(netnsPath);
    return { id, netnsPath };
  }

  async inspect(name: string): Promise<Record<string, any>> {
    const r = await this.podman(['inspect', '--type', 'container', name]);
    const arr = JSON.parse(String(r.stdout)) as Array<Record<string, any>>;
    if (!arr[0]) throw new Error(`podman inspect ${name}: nothing`);
    return arr[0];
  }

  async netnsPath(name: string): Promise<string> {
    const i = await this.inspect(name);
    return String(i.NetworkSettings?.SandboxKey ?? '');
  }

  /** The container's addresses on its networks, as podman recorded them from the CNI result (IPv4 then IPv6). */
  async containerIPs(name: string): Promise<string[]> {
    const i = await this.inspect(name);
    const nets = (i.NetworkSettings?.Networks ?? {}) as Record<string, { IPAddress?: string; GlobalIPv6Address?: string }>;
    const out: string[] = [];
    for (const n of Object.values(nets)) {
      if (n.IPAddress) out.push(n.IPAddress);
      if (n.GlobalIPv6Address) out.push(n.GlobalIPv6Address);
    }
    return out;
  }

  async exec(name: string, argv: string[], opts: { reject?: boolean } = {}) {
    return this.podman(['exec', name, ...argv], { reject: opts.reject ?? true });
  }

  /** Stops the container: podman runs the CNI DEL here. */
  async stop(name: string): Promise<void> {
    await this.podman(['stop', '--time', '0', name]);
  }

  /** Removes the container (forcing a running one: DEL happens too). */
  async rm(name: string, opts: { force?: boolean } = {}): Promise<void> {
    await this.podman(['rm', ...(opts.force ? ['--force', '--time', '0'] : []), name]);
  }

  /** podman's (libcni 1.1.2) cache file for a container of this bed. */
  podmanCacheFile(containerId: string, ifname = 'eth0'): string {
    return path.join('/var/lib/cni/results', `${this.network}-${containerId}-${ifname}`);
  }

  /**
   * Removes everything, even after failures: containers (rm -f: DEL), stray conmon/runc processes of this bed,
   * mounts below the bed, netnses of our containers, our podman cache files, the temp dir.
   */
  async cleanup(): Promise<void> {
    const { step, report } = teardown();
    if (!existsSync(this.baseDir)) return;
    await step('rm containers', async () => {
      const r = await this.podman(['ps', '-aq', '--no-trunc'], { reject: false });
      for (const id of String(r.stdout).split('\n').filter(Boolean)) this.containerIds.add(id);
      for (const id of this.containerIds) {
        const ns = await this.netnsPathQuiet(id);
        if (ns) this.netnsPaths.add(ns);
      }
      await this.podman(['rm', '--all', '--force', '--time', '0'], { reject: false, timeoutMs: 30_000 });
    });
    await step('kill strays', () => this.killStrays());
    await step('unmount', () => unmountBelow(this.baseDir));
    await step('netns', async () => {
      for (const ns of this.netnsPaths) {
        if (!existsSync(ns)) continue;
        if (path.dirname(ns) === '/run/netns') await execa('ip', ['netns', 'del', path.basename(ns)], { reject: false });
      }
    });
    await step('podman cni cache', async () => {
      const dir = '/var/lib/cni/results';
      if (!existsSync(dir)) return;
      for (const f of await readdir(dir)) if (f.startsWith(`${this.network}-`)) await rm(path.join(dir, f), { force: true });
    });
    await step('rm tree', () => rm(this.baseDir, { recursive: true, force: true, maxRetries: 3 }));
    report(`PodmanBed.cleanup (${this.baseDir})`);
  }

  private async netnsPathQuiet(id: string): Promise<string> {
    const r = await this.podman(['inspect', '--type', 'container', '--format', '{{.NetworkSettings.SandboxKey}}', id], { reject: false });
    return r.exitCode === 0 ? String(r.stdout).trim() : '';
  }

  /**
   * Stray processes of this bed, killed by PID: conmon/runc name our dirs in their arguments; the container's own
   * processes have our rootfs as their root mount. The network namespaces those processes sit in (when bind-mounted
   * under /run/netns) are remembered for deletion: podman may not be able to tell us any more.
   */
  private async killStrays(): Promise<void> {
    const netnsInodes = new Set<string>();
    for (const pid of await readdir('/proc')) {
      if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
      let mine = false;
      try {
        const cmd = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).replaceAll('\0', ' ');
        if (cmd.includes(`${this.baseDir}/`)) mine = true;
        else {
          const rootLine = (await readFile(`/proc/${pid}/mountinfo`, 'utf8')).split('\n').find((l) => l.split(' ')[4] === '/');
          const src = rootLine?.split(' ')[3] ?? '';
          if (src === this.rootfs || src.startsWith(`${this.rootfs}/`)) {
            mine = true;
            const ns = await readlink(`/proc/${pid}/ns/net`).catch(() => '');
            const m = /^net:\[(\d+)\]$/.exec(ns);
            if (m) netnsInodes.add(m[1]!);
          }
        }
      } catch {
        continue; // gone, or a kernel thread
      }
      if (!mine) continue;
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone already
      }
    }
    if (netnsInodes.size && existsSync('/run/netns')) {
      for (const n of await readdir('/run/netns')) {
        const st = await stat(path.join('/run/netns', n)).catch(() => undefined);
        if (st && netnsInodes.has(String(st.ino))) this.netnsPaths.add(path.join('/run/netns', n));
      }
    }
  }
}

/** True when podman is installed (the podman tests skip, or fail in CI, otherwise). */
export function hasPodman(): boolean {
  return ['/usr/bin/podman', '/usr/local/bin/podman'].some((p) => existsSync(p));
}
