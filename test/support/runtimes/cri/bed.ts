// A private containerd acting as the node's CRI runtime, for tests that need the kubelet path:
// RunPodSandbox/StopPodSandbox/RemovePodSandbox through containerd's CRI plugin, which runs our conflist through
// libcni. The build is Debian 12's 1.6 by default, or the one CONTAINERD_BIN_DIR names (e.g. 2.x, see
// ./containerd.ts, which also writes its config). Everything of one bed lives in a temp dir (root, state, socket,
// runc root, CNI bin and conf dirs, host-local's dataDir, the shim's state and log), and containerd runs in a
// network namespace standing for the node: pods' host-side veths, routes, ebtables rules and neighbours all land
// there, never on the host.
//
// What containerd needed here (verified in ../shared/cri-lab; see docs/runtimes.md):
// - restrict_oom_score_adj = true: this machine lacks CAP_SYS_RESOURCE, and runc fails to set the sandbox's
//   oom_score_adj (-998) otherwise ("can't get final child's PID from pipe: EOF").
// - cgroupfs (SystemdCgroup = false): no systemd here. Pods get a cgroup parent unique to the bed, so cleanup can
//   remove exactly the cgroups it made.
// - ONE cni bin dir (1.6 takes a single directory; "a:b" is not split): Debian's plugins are symlinked into it
//   next to the shim.
// - conf_dir reloads on a RENAME inside the directory (CREATE and CHMOD are ignored; writing in place can be read
//   half-written): setConfList() writes a temp file in the dir, renames it, and waits until CRI Status shows the
//   new text loaded (the conf syncer logs an event before it reloads, and 2.x logs the temp file's WRITE too).
// - 2.x does asynchronously what 1.6 does at once: the CRI image store sees a `ctr images import` a moment after
//   ctr returns (importImage polls ImageStatus).
// - containerd runs through `nsenter --net=<node netns>`, not `ip netns exec`: the latter also unshares the mount
//   namespace, so the pod netns containerd bind-mounts under /var/run/netns would be invisible to the tests and to
//   `ipam-shim gc` (which proves a sandbox alive through its netns path), unlike on a real node.
// - cilium-cni's place: the stand-in of a Cilium line (test/support/shim/cilium.ts; CILIUM_LINE picks it, 1.17 by
//   default) is linked into the bin dir as `cilium-cni`, and the cilium-agent API stand-in it asks
//   (test/support/doubles/cilium-agent.ts) listens on a socket in the bed's dir from create() to cleanup();
//   containerd's environment names that socket, and libcni passes containerd's environment on to every plugin.
// - Paths containerd (1.6 and 2.1 alike) uses whatever its config says: /var/run/netns/cni-<uuid> (pod netns),
//   /var/lib/cni/results/<network>-<id>-<ifname> (libcni's result cache), /run/containerd/s/<sha256> (shim
//   sockets). The network name is unique per bed; cleanup removes only entries of this bed's sandboxes.
// - azure-ipam's place (the `cns` option): the azure-ipam stand-in is linked into the bin dir and the CNS stand-in
//   (test/support/doubles/cns.ts) listens on a free port of the node netns' loopback, where containerd runs the
//   plugins, from create() to cleanup(). Its files live in a temp dir of their own, outside the bed's: a node's crash
//   (crashAndWipe, reboot) kills what names the bed's dir, and CNS is a service of its own that survives it.
import { execa } from 'execa';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, open, readdir, readFile, rename, rm, rmdir, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { buildSandboxImage } from '../../../fixtures/cri/sandbox-image.js';
import { FIXTURE_BIN, hostLocalAllocations, pluginOutput, ROOT } from '../../shim/cni.js';
import { uid } from '../../net/netns.js';
import { CriClient, type PodSandboxConfig, type PodSandboxStatus } from './client.js';
import { unmountBelow } from '../mounts.js';
import { teardown } from '../../teardown.js';
import { containerdBinDir, containerdBuild, containerdConfig, missingTools, nodeEnv, type ContainerdBuild } from './containerd.js';
import { CiliumAgentStandIn, type CiliumAgentOptions } from '../../doubles/cilium-agent.js';
import { ciliumCniDir, type CiliumLine } from '../../shim/cilium.js';
import { ciliumLine } from './conflists.js';
import { CnsStandin, type AzureIpamTarget, type CnsPool, type CnsScheme } from '../../doubles/cns.js';

/** The built single executable: what a node runs. IPAM_SHIM_BIN tests another build. */
export const CRI_SHIM = process.env.IPAM_SHIM_BIN ?? path.join(ROOT, 'dist/ipam-shim');
export const SANDBOX_IMAGE = 'localhost/ipam-shim-test/pause:1';
const CNI_RESULTS = '/var/lib/cni/results';
const SHIM_SOCKETS = '/run/containerd/s';
const K8S_NAMESPACE = 'k8s.io';
const CONFLIST_NAME = '10-ipam-shim-test.conflist';

export interface CriBedDirs {
  baseDir: string;
  /** host-local's dataDir. */
  dataDir: string;
  /** The shim's stateDir (ledger) and log file. */
  stateDir: string;
  logFile: string;
  /** The network name (unique per bed): use it as the conflist's name. */
  network: string;
  /** containerd's CNI bin dir (holds every plugin, the shim as `ipam-shim`). */
  binDir: string;
  /** The CNS stand-in azure-ipam asks (a bed with the `cns` option only). */
  cns?: AzureIpamTarget;
}

export interface CriBedOptions {
  /** The netns standing for the node (name under /run/netns); containerd and every plugin run there. */
  node: string;
  /** The first conflist (more with setConfList); undefined starts containerd with an empty conf dir (a node before cilium-agent or CNS wrote one). */
  confList: (dirs: CriBedDirs) => Record<string, unknown> | undefined;
  /** Reference plugins symlinked into the bin dir; default CNI_PLUGIN_DIR or /usr/lib/cni. */
  pluginDir?: string;
  /** Extra executables for the bin dir: name → path. */
  plugins?: Record<string, string>;
  /** The containerd build's directory (containerd, containerd-shim-runc-v2, ctr); default CONTAINERD_BIN_DIR or the system's. */
  containerdBinDir?: string;
  /**
   * The Cilium line whose cilium-cni stand-in sits in the bin dir as `cilium-cni` (default CILIUM_LINE or 1.17),
   * with its agent API stand-in running; false: neither (a bed whose lists name no cilium-cni).
   */
  cilium?: CiliumLine | false;
  /** The agent stand-in's settings (router addresses); default IPv4 and IPv6 both on, as the dual-stack suites need. */
  ciliumAgent?: Omit<CiliumAgentOptions, 'socketPath'>;
  /**
   * azure-ipam over CNS for the lists that name it (conflists.ts, `delegate: 'azure-ipam'`): the azure-ipam stand-in
   * in the bin dir and a CNS stand-in in the node netns with this key scheme and these pools, for the bed's life.
   */
  cns?: { scheme: CnsScheme; pools: CnsPool[] };
}

/** The agent stand-in's router addresses in every bed (--local-router-ipv4/6): outside every range the suites use. */
export const CILIUM_ROUTERS = { routerIPv4: '169.254.23.1', routerIPv6: 'fd00:ffff::1' };

export interface Pod {
  status: PodSandboxStatus;
  id: string;
  name: string;
  /** Every address the runtime reports, primary first. */
  ips: string[];
  netnsPath: string;
  /** The sandbox's pause process. */
  pid: number;
}

/** Stateful: one per suite (or per test); cleanup() in afterAll/afterEach, also when a test failed. */
export class CriBed implements CriBedDirs {
  readonly baseDir: string;
  readonly dataDir: string;
  readonly stateDir: string;
  readonly logFile: string;
  readonly network: string;
  readonly binDir: string;
  readonly confDir: string;
  readonly socket: string;
  readonly containerdLog: string;
  readonly node: string;
  /** Pods' cgroups go below this parent (cgroupfs), unique per bed. */
  readonly cgroupParent: string;
  /** The containerd build this bed runs (CONTAINERD_BIN_DIR or the system's): its version and major. */
  readonly containerd: ContainerdBuild;
  /**
   * A node's environment: containerd and the plugins it runs get nothing else from the test process (but the
   * cilium-cni stand-in's agent socket, its waits and its log).
   */
  private env: Record<string, string>;
  /** cilium-agent's API stand-in (undefined with `cilium: false`): down()/up()/slow() model the agent's outages. */
  ciliumAgent: CiliumAgentStandIn | undefined;
  /** The Cilium line whose cilium-cni stand-in the bin dir holds (undefined with `cilium: false`). */
  ciliumLine: CiliumLine | undefined;
  private ciliumLineAtStart: CiliumLine | undefined;
  /** The cilium-cni stand-in's log: one JSON line per call (CILIUM_CNI_STANDIN_LOG). */
  readonly ciliumLog: string;
  /** The CNS stand-in (the `cns` option), and its key scheme. */
  cns: CnsStandin | undefined;
  cnsScheme: CnsScheme | undefined;
  private cnsDir: string | undefined;
  private readonly configPath: string;
  private daemon: { child: ChildProcess; exited: Promise<void> } | undefined;
  private pid: number | undefined;
  private client: CriClient | undefined;
  private readonly sandboxIds = new Set<string>();
  private readonly netnsPaths = new Set<string>();

  private constructor(baseDir: string, node: string, containerdBinDir: string) {
    this.baseDir = baseDir;
    this.node = node;
    this.network = `cri-${uid(8)}`;
    this.dataDir = path.join(baseDir, 'host-local');
    this.stateDir = path.join(baseDir, 'shim-state');
    this.logFile = path.join(baseDir, 'shim.log');
    this.binDir = path.join(baseDir, 'cni-bin');
    this.confDir = path.join(baseDir, 'net.d');
    this.socket = path.join(baseDir, 'containerd.sock');
    this.containerdLog = path.join(baseDir, 'containerd.log');
    this.configPath = path.join(baseDir, 'config.toml');
    this.cgroupParent = `/ipam-shim-${this.network}`;
    this.ciliumLog = path.join(baseDir, 'cilium-cni.jsonl');
    this.containerd = containerdBuild(containerdBinDir);
    this.env = nodeEnv(this.containerd);
  }

  /** Creates the dirs, config, bin dir and first conflist, starts containerd and imports the sandbox image. */
  static async create(opts: CriBedOptions): Promise<CriBed> {
    const bed = new CriBed(await mkdtemp(path.join(os.tmpdir(), 'cri-bed-')), opts.node, path.resolve(opts.containerdBinDir ?? containerdBinDir()));
    try {
      await bed.setup(opts);
      await bed.start();
      await bed.importImage();
      return bed;
    } catch (e) {
      await bed.cleanup();
      throw e;
    }
  }

  private async setup(opts: CriBedOptions): Promise<void> {
    for (const d of ['root', 'state', 'runc', 'pod-logs', 'cni-bin', 'net.d'])
      await mkdir(path.join(this.baseDir, d), { recursive: true, mode: 0o700 });
    const pluginDir = opts.pluginDir ?? process.env.CNI_PLUGIN_DIR ?? '/usr/lib/cni';
    for (const p of await readdir(pluginDir)) await symlink(path.join(pluginDir, p), path.join(this.binDir, p));
    await symlink(CRI_SHIM, path.join(this.binDir, 'ipam-shim'));
    for (const [name, file] of Object.entries(opts.plugins ?? {})) await symlink(file, path.join(this.binDir, name));
    if (opts.cns) {
      await symlink(path.join(FIXTURE_BIN, 'azure-ipam'), path.join(this.binDir, 'azure-ipam'));
      this.cnsDir = await mkdtemp(path.join(os.tmpdir(), 'cri-cns-'));
      this.cns = await CnsStandin.start({ ...opts.cns, dir: this.cnsDir, netns: this.node });
      this.cnsScheme = opts.cns.scheme;
    }
    const line = opts.cilium ?? ciliumLine();
    if (line) {
      this.ciliumAgent = await CiliumAgentStandIn.start({
        ...CILIUM_ROUTERS,
        ...opts.ciliumAgent,
        socketPath: path.join(this.baseDir, 'cilium.sock'),
      });
      this.env = { ...this.env, ...this.ciliumEnv };
      await this.useCiliumLine(line);
      this.ciliumLineAtStart = line;
    }
    await writeFile(this.configPath, containerdConfig(this.containerd, { ...this, sandboxImage: SANDBOX_IMAGE }));
    const first = opts.confList(this);
    if (first) await this.setConfList(first);
  }

  /**
   * Puts `line`'s cilium-cni stand-in in the bin dir (renamed over the old link: a plugin run never finds none), as a
   * node's Cilium upgrade replaces the binary; the list is not touched.
   */
  async useCiliumLine(line: CiliumLine): Promise<void> {
    const tmp = path.join(this.binDir, '.cilium-cni.tmp');
    await rm(tmp, { force: true });
    await symlink(path.join(ciliumCniDir(line), 'cilium-cni'), tmp);
    await rename(tmp, path.join(this.binDir, 'cilium-cni'));
    this.ciliumLine = line;
  }

  /** What a runtime on this node passes on to cilium-cni (its agent's socket, waits and log); {} without it. */
  get ciliumEnv(): Record<string, string> {
    return this.ciliumAgent ? { ...this.ciliumAgent.env(), CILIUM_CNI_STANDIN_LOG: this.ciliumLog } : {};
  }

  /** The agent stand-in answering again at once (after a test's down() or slow()), the bed's own line in place. */
  private async ciliumAgentUp(): Promise<void> {
    this.ciliumAgent?.slow(0);
    await this.ciliumAgent?.up();
    if (this.ciliumLineAtStart && this.ciliumLine !== this.ciliumLineAtStart) await this.useCiliumLine(this.ciliumLineAtStart);
  }

  get cri(): CriClient {
    if (!this.client) throw new Error('containerd is not running');
    return this.client;
  }

  /** Starts containerd in the node netns with a node's environment and waits until CRI answers. */
  async start(): Promise<void> {
    if (this.pid) throw new Error(`containerd already runs (pid ${this.pid})`);
    // A daemon, not a command: spawned detached with its output in a file, stopped by pid (stop/cleanup).
    const log = await open(this.containerdLog, 'a');
    let child: ChildProcess;
    try {
      child = spawn('nsenter', [`--net=/run/netns/${this.node}`, this.containerd.containerd, '--config', this.configPath], {
        env: this.env,
        detached: true,
        stdio: ['ignore', log.fd, log.fd],
      });
    } finally {
      await log.close();
    }
    const exited = new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
    child.unref();
    this.daemon = { child, exited };
    this.pid = child.pid;
    this.client = new CriClient(this.socket);
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        await this.client.version(2_000);
        return;
      } catch (e) {
        if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline)
          throw new Error(`containerd did not come up: ${(e as Error).message}\n${await this.logTail()}`);
        await sleep(100);
      }
    }
  }

  /** containerd's pid while it runs (its CPU time, and its reaped children's, are in /proc/<pid>/stat). */
  get daemonPid(): number | undefined {
    return this.pid;
  }

  /** Stops containerd (SIGTERM, or SIGKILL as a crash), without touching its pods. */
  async stop(signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<void> {
    const pid = this.pid;
    this.client?.close();
    this.client = undefined;
    this.pid = undefined;
    if (!pid) return;
    signalPid(pid, signal);
    const exited = await Promise.race([this.daemon!.exited.then(() => true), sleep(15_000).then(() => false)]);
    if (!exited) {
      signalPid(pid, 'SIGKILL');
      await this.daemon!.exited;
    }
    this.daemon = undefined;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  private async importImage(): Promise<void> {
    const tar = path.join(this.baseDir, 'pause.tar');
    await buildSandboxImage(tar, SANDBOX_IMAGE);
    await execa(this.containerd.ctr, ['--address', this.socket, '-n', K8S_NAMESPACE, 'images', 'import', tar], { env: this.env, extendEnv: false });
    // 1.6's CRI sees the image when ctr returns; 2.x's image store learns of it from an event a moment later.
    const deadline = Date.now() + 10_000;
    while (!(await this.cri.imageStatus(SANDBOX_IMAGE))) {
      if (Date.now() > deadline)
        throw new Error(`CRI does not see the imported sandbox image (containerd ${this.containerd.version})\n${await this.logTail()}`);
      await sleep(50);
    }
  }

  /**
   * Replaces the conflist the way containerd notices: a temp file in conf_dir renamed over the old one. With
   * containerd running, waits until CRI Status shows this text loaded (and fails with containerd's load error if it
   * did not load).
   */
  async setConfList(list: Record<string, unknown>): Promise<void> {
    const final = this.confListPath;
    const tmp = path.join(this.confDir, `.${CONFLIST_NAME}.tmp`);
    const name = String(list.name ?? this.network);
    const text = `${JSON.stringify({ ...list, name }, null, 2)}\n`;
    await writeFile(tmp, text);
    await rename(tmp, final);
    if (!this.pid) return;
    const deadline = Date.now() + 10_000;
    for (;;) {
      const loaded = await this.loadedConfList(name).catch((e: Error) => ({ source: undefined, loadStatus: e.message }));
      if (loaded.source === text) return;
      if (Date.now() > deadline) throw new Error(`containerd did not load ${final} (last load: ${loaded.loadStatus})\n${await this.logTail()}`);
      await sleep(50);
    }
  }

  /**
   * What containerd's CRI has loaded, from CRI Status (verbose): the text of the network `name` (default this bed's;
   * undefined when none is loaded) and the last load's status ("OK" or containerd's error).
   */
  async loadedConfList(name = this.network): Promise<{ source: string | undefined; loadStatus: string }> {
    const { info } = await this.cri.statusVerbose(true, 5_000);
    const config = JSON.parse(info.cniconfig ?? '{}') as { Networks?: Array<{ Config: { Name: string; Source: string } }> };
    const network = (config.Networks ?? []).find((n) => n.Config.Name === name);
    return { source: network?.Config.Source, loadStatus: info.lastCNILoadStatus ?? 'unknown' };
  }

  /** How many conf dir changes containerd has logged (a reload follows each). */
  async reloadCount(): Promise<number> {
    const log = await readFile(this.containerdLog, 'utf8').catch(() => '');
    return log.split('\n').filter((l) => l.includes('receiving change event from cni conf dir')).length;
  }

  async logTail(lines = 30): Promise<string> {
    const log = await readFile(this.containerdLog, 'utf8').catch(() => '');
    return log.trimEnd().split('\n').slice(-lines).join('\n');
  }

  /** A kubelet-like sandbox config: unique uid, log dir, this bed's cgroup parent and label. */
  sandboxConfig(name: string, extra: Partial<PodSandboxConfig> = {}): PodSandboxConfig {
    const podUid = randomUUID();
    return {
      metadata: { name, uid: podUid, namespace: 'default', attempt: 0 },
      hostname: name,
      log_directory: path.join(this.baseDir, 'pod-logs', `default_${name}_${podUid}`),
      labels: { 'ipam-shim-bed': this.network },
      annotations: {},
      linux: { cgroup_parent: this.cgroupParent },
      ...extra,
    };
  }

  /** RunPodSandbox, then what the tests need to know about the pod. */
  async runPod(name: string, extra: Partial<PodSandboxConfig> = {}): Promise<Pod> {
    const config = this.sandboxConfig(name, extra);
    await mkdir(config.log_directory, { recursive: true });
    const id = await this.cri.runPodSandbox(config);
    this.sandboxIds.add(id);
    return this.inspect(id);
  }

  async inspect(id: string): Promise<Pod> {
    const { status, info } = await this.cri.podSandboxStatus(id);
    const netnsPath: string = (info.runtimeSpec?.linux?.namespaces ?? []).find((n: { type: string }) => n.type === 'network')?.path ?? '';
    if (netnsPath) this.netnsPaths.add(netnsPath);
    const ips = status.network ? [status.network.ip, ...status.network.additional_ips.map((a) => a.ip)].filter(Boolean) : [];
    return { id, name: status.metadata.name, ips, netnsPath, pid: Number(info.pid ?? 0), status };
  }

  /** The key CNS holds a pod's addresses under: `name:namespace` or the sandbox's id, by the bed's scheme. */
  cnsKey(pod: Pick<Pod, 'id' | 'name'>): string {
    return this.cnsScheme === 'pod' ? `${pod.name}:default` : pod.id;
  }

  /** Every address the delegated IPAM holds now, sorted: CNS's (a bed with `cns`), else host-local's store. */
  async delegateHeld(): Promise<string[]> {
    return this.cns ? this.cns.held() : hostLocalAllocations(this.dataDir, this.network);
  }

  /** kubelet's teardown: StopPodSandbox (CNI DEL), then RemovePodSandbox (DEL again). */
  async removePod(id: string): Promise<void> {
    await this.cri.stopPodSandbox(id);
    await this.cri.removePodSandbox(id);
  }

  /**
   * The node loses its runtime: containerd and every sandbox of this bed are killed (no StopPodSandbox, so no CNI
   * DEL), and what would not survive is wiped — the pods' netns, libcni's cache entries, containerd's root and
   * state. host-local's store and the shim's ledger (node state of their own) stay. Then containerd starts afresh.
   */
  async crashAndWipe(): Promise<void> {
    await this.killNode();
    for (const f of await this.cachedResults()) await rm(path.join(CNI_RESULTS, f), { force: true });
    for (const id of this.sandboxIds) {
      await rm(path.join(CNI_RESULTS, `cni-loopback-${id}-lo`), { force: true });
      await rm(shimSocket(this.socket, id), { force: true });
    }
    await removeCgroups(this.cgroupParent);
    await this.emptyDirs(['root', 'state', 'runc']);
    await this.start();
    await this.importImage();
  }

  /**
   * The node reboots: containerd, its shims and every sandbox killed (no CNI DEL); what lives on tmpfs is gone —
   * the pods' netns (/run/netns), containerd's state dir, runc's root, the shim sockets, the cgroups — while what
   * lives under /var/lib stays: containerd's root (its sandboxes' metadata), libcni's result cache, host-local's
   * store, the shim's ledger. Then containerd starts again and lists the old sandboxes, their netns gone.
   */
  async reboot(): Promise<void> {
    await this.killNode();
    for (const id of this.sandboxIds) await rm(shimSocket(this.socket, id), { force: true });
    await removeCgroups(this.cgroupParent);
    await this.emptyDirs(['state', 'runc']);
    await this.start();
  }

  /**
   * What a crash and a reboot both do first: containerd, its shims and every sandbox killed (no CNI DEL), the bed's
   * mounts and the pods' netns gone.
   */
  private async killNode(): Promise<void> {
    await this.stop('SIGKILL');
    await this.killStrays();
    await unmountBelow(this.baseDir);
    await this.removePodNetns();
  }

  /** Unmounts and removes the pods' network namespaces (those still there). */
  private async removePodNetns(): Promise<void> {
    for (const ns of this.netnsPaths) {
      if (!existsSync(ns)) continue;
      await execa('umount', [ns], { reject: false });
      await rm(ns, { force: true });
    }
  }

  /** containerd's directories `dirs` (under the bed) removed and made again, empty. */
  private async emptyDirs(dirs: string[]): Promise<void> {
    for (const d of dirs) {
      await rm(path.join(this.baseDir, d), { recursive: true, force: true, maxRetries: 3 });
      await mkdir(path.join(this.baseDir, d), { mode: 0o700 });
    }
  }

  /** The path of the conflist containerd uses (for the operator CLI's --conflist). */
  get confListPath(): string {
    return path.join(this.confDir, CONFLIST_NAME);
  }

  /** Runs the built shim's operator CLI on the node (its netns, the host's mount namespace, a node's env). */
  async cli(args: string[]): Promise<{ exitCode: number; stdout: string; stderr: string; json: any }> {
    const r = await execa(
      'nsenter',
      [`--net=/run/netns/${this.node}`, CRI_SHIM, ...args, '--conflist', this.confListPath, '--cni-path', this.binDir, '--json'],
      {
        env: this.env,
        extendEnv: false,
        reject: false,
      },
    );
    return pluginOutput(r);
  }

  /** Stop and remove every sandbox containerd lists (best effort: each one is tried). */
  async removeAllPods(): Promise<void> {
    if (!this.client) return;
    const items = await this.cri.listPodSandbox();
    for (const s of items) {
      this.sandboxIds.add(s.id);
      await this.inspect(s.id).catch(() => undefined);
      await this.cri.stopPodSandbox(s.id).catch(() => undefined);
      await this.cri.removePodSandbox(s.id).catch(() => undefined);
    }
  }

  /**
   * Between tests: undoes what the last test left, also when it failed half-way (containerd stopped or wiped, pods
   * running, records written), so the next starts on a clean node: containerd runs with the sandbox image and every
   * sandbox is removed through CRI (plugins get their DELs). With `stores` (after a failed test) the shim's ledger
   * and host-local's store are emptied too (their dirs stay: a test may have mounted them elsewhere), and CNS
   * restarts with no pod (everything free); after a passing test they are left as they are, so a leak a test did not
   * assert shows in the next one.
   */
  async reset({ stores = true }: { stores?: boolean } = {}): Promise<void> {
    try {
      await this.ciliumAgentUp();
      if (!this.pid) await this.start();
      if (!(await this.cri.imageStatus(SANDBOX_IMAGE))) await this.importImage();
      await this.removeAllPods();
    } finally {
      for (const dir of stores ? [this.stateDir, this.dataDir] : []) {
        for (const entry of await readdir(dir).catch(() => [] as string[])) await rm(path.join(dir, entry), { recursive: true, force: true });
      }
      if (stores) await this.cns?.restart({ pods: [] });
    }
  }

  /** Sandbox ids this bed has seen (RunPodSandbox or ListPodSandbox). */
  knownSandboxes(): string[] {
    return [...this.sandboxIds];
  }

  /** Remembers sandboxes created behind the bed's back (e.g. by another client on the socket). */
  track(id: string, netnsPath?: string): void {
    this.sandboxIds.add(id);
    if (netnsPath) this.netnsPaths.add(netnsPath);
  }

  /** libcni's result cache entries of this bed's network. */
  async cachedResults(): Promise<string[]> {
    if (!existsSync(CNI_RESULTS)) return [];
    return (await readdir(CNI_RESULTS)).filter((f) => f.startsWith(`${this.network}-`)).sort();
  }

  /**
   * Removes everything, also after failures: every sandbox through CRI (so plugins get their DELs), containerd by
   * its pid, stray shims and pause processes of this bed, mounts below the bed, pod netns, result cache entries,
   * shim sockets and cgroups of this bed's sandboxes, the temp dir.
   */
  async cleanup(): Promise<void> {
    const { step, report } = teardown();
    // A test that took cilium-agent down: its DELs would fail (999) and leave the pods.
    await step('cilium-agent stand-in up', () => this.ciliumAgentUp());
    if (this.client) await step('remove sandboxes', () => this.removeAllPods());
    await step('stop containerd', () => this.stop());
    await step('kill strays', () => this.killStrays());
    await step('unmount', () => unmountBelow(this.baseDir));
    await step('pod netns', () => this.removePodNetns());
    await step('result cache', async () => {
      for (const f of await this.cachedResults()) await rm(path.join(CNI_RESULTS, f), { force: true });
      // the loopback plugin's entries are keyed by sandbox id, not by our network
      for (const id of this.sandboxIds) await rm(path.join(CNI_RESULTS, `cni-loopback-${id}-lo`), { force: true });
    });
    await step('shim sockets', async () => {
      for (const id of this.sandboxIds) await rm(shimSocket(this.socket, id), { force: true });
    });
    await step('cgroups', () => removeCgroups(this.cgroupParent));
    await step('cilium-agent stand-in', async () => this.ciliumAgent?.stop());
    await step('CNS stand-in', async () => {
      await this.cns?.stop();
      if (this.cnsDir) await rm(this.cnsDir, { recursive: true, force: true });
    });
    await step('rm tree', () => rm(this.baseDir, { recursive: true, force: true, maxRetries: 3 }));
    report(`CriBed.cleanup (${this.baseDir})`);
  }

  /** Processes of this bed, by pid: shims name our socket in their arguments, pause processes sit in our cgroup. */
  async killStrays(): Promise<void> {
    // SIGKILL is delivered asynchronously: wait until they are gone, so their mounts and cgroups can be removed.
    const deadline = Date.now() + 10_000;
    for (;;) {
      const pids = await bedPids(this.baseDir, this.cgroupParent);
      if (!pids.length) return;
      if (Date.now() > deadline) throw new Error(`processes of the bed survive SIGKILL: ${pids.join(' ')}`);
      for (const pid of pids) signalPid(pid, 'SIGKILL');
      await sleep(50);
    }
  }
}

/** containerd 1.6's shim socket for a task: /run/containerd/s/sha256(<grpc address>/<namespace>/<id>). */
export function shimSocket(containerdSocket: string, id: string): string {
  return path.join(
    SHIM_SOCKETS,
    createHash('sha256')
      .update(path.join(containerdSocket, K8S_NAMESPACE, id))
      .digest('hex'),
  );
}

/** Live pids whose command line names `baseDir` or whose cgroup lies below `cgroupParent` (the caller's own excluded). */
export async function bedPids(baseDir: string, cgroupParent: string): Promise<number[]> {
  const out: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      // a zombie holds nothing any more (and its parent reaps it)
      if (/^\d+ \(.*\) Z /.test(await readFile(`/proc/${entry}/stat`, 'utf8'))) continue;
      const cmd = (await readFile(`/proc/${entry}/cmdline`, 'utf8')).replaceAll('\0', ' ');
      const cgroups = await readFile(`/proc/${entry}/cgroup`, 'utf8');
      if (cmd.includes(`${baseDir}/`) || cgroups.split('\n').some((l) => l.split(':')[2]?.startsWith(`${cgroupParent}/`))) out.push(Number(entry));
    } catch {
      // gone, or a kernel thread
    }
  }
  return out;
}

async function removeCgroups(parent: string): Promise<void> {
  const root = '/sys/fs/cgroup';
  const dirs = [path.join(root, parent), ...(await readdir(root).catch(() => [] as string[])).map((c) => path.join(root, c, parent))];
  for (const dir of dirs) {
    if (!existsSync(dir)) continue;
    for (const child of await readdir(dir, { withFileTypes: true }))
      if (child.isDirectory()) await rmdir(path.join(dir, child.name)).catch(() => undefined);
    await rmdir(dir).catch(() => undefined);
  }
}

function signalPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // gone already
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** containerd, its shim and ctr (in `binDir`: CONTAINERD_BIN_DIR's or the system's), runc and busybox-static: what the CRI bed needs besides root. */
export function hasContainerd(binDir = containerdBinDir()): boolean {
  return missingTools(binDir).length === 0 && ['/usr/sbin/runc', '/bin/busybox'].every((p) => existsSync(p));
}
