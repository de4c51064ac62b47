// The node of the life (test/life/life.ts): containerd 2.x's CRI bed in a node netns beside a VNet host
// (test/support/net/azure-vnet.ts), cilium-cni's stand-in of one Cilium line and its agent API stand-in (the bed's),
// the agent as its image under podman with the DaemonSet's securityContext and mounts (as
// test/node/whole-node.test.ts runs it), the conflist written by a cilium/CNS-shaped writer, azure-vnet residue
// planted and looked for, and what the invariants read (ledger, host-local's store, the shim's log).
import { execa } from 'execa';
import { copyFile, mkdir, mkdtemp, readFile, rename, rm, statfs, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../../scripts/image/build-image.js';
import { FIXTURE_BIN } from '../support/shim/cni.js';
import { vnetBridge } from '../support/net/azure-vnet.js';
import { CriBed } from '../support/runtimes/cri/bed.js';
import { capabilityNames, daemonSet, podmanMountArgs, podmanSecurityArgs } from '../support/deploy/daemonset.js';
import { inNs, TestNet, uid } from '../support/net/netns.js';
import { buildTestImage } from '../support/deploy/node-image.js';
import { PodmanBed } from '../support/runtimes/podman.js';
import { hostLocalStore, readLedger } from '../support/shim/robust.js';
import { ciliumCni, type CiliumLine } from '../support/shim/cilium.js';

const CNI_CACHE = '/var/lib/cni';
export const AGENT_INTERVAL_S = 2;
export const AGENT_GRACE_S = 5;
/**
 * The confirmed gc mode's window in the life (the DaemonSet's mode; shipped: 15 minutes and 3 passes): short, so the
 * life sees a planted leak reported, kept through the window, then released.
 */
export const CONFIRM_AFTER_S = 12;
export const CONFIRM_PASSES = 3;
const DEAD_MAC = '00:0d:3a:30:47:42';

export interface NodeOptions {
  containerdBinDir: string;
  pluginDir: string;
  /** The Cilium line in cilium-cni's place: which list versions it takes (1.17: up to 1.0.0; newer: 1.1.0). */
  ciliumLine: CiliumLine;
  /** host-local's range: first and last address of 10.240.1.0/24. */
  rangeStart: number;
  rangeEnd: number;
  /** A CIDR inside the range no pod may hold (the shim's reservedCIDRs). */
  reserved: string;
}

export class LifeNode {
  readonly net = new TestNet();
  node = '';
  vnet = '';
  bed!: CriBed;
  podman!: PodmanBed;
  image = '';
  /** The shim's stateDir, beside the agent's own files. */
  nodeDir = '';
  stateDir = '';
  /** The DaemonSet's log directory: a small tmpfs, so the runner can fill it. */
  logDir = '';
  /** A second build of the shim for the rollout (the same executable with a marker appended). */
  secondBuild = '';
  container = `ipam-shim-life-${uid(8)}`;
  readonly port = 20_000 + Math.floor(Math.random() * 20_000);
  agentMode: 'report' | 'apply' | 'confirmed' = 'report';
  readonly healthOwner = `health-${uid()}`;

  constructor(readonly o: NodeOptions) {}

  get network(): string {
    return this.bed.network;
  }
  get logFile(): string {
    return path.join(this.logDir, 'shim.log');
  }
  get flaky(): string {
    return path.join(this.bed.binDir, 'flaky-ipam');
  }
  ipOf(n: number): string {
    return `10.240.1.${n}`;
  }

  /** Everything but containerd's first start: the podman store and image, the node's dirs. */
  async prepare(log: (s: string) => void): Promise<void> {
    this.podman = await PodmanBed.create({ confList: { cniVersion: '0.4.0', plugins: [{ type: 'loopback' }] } });
    this.image = await buildTestImage(this.podman, 'node life');
    this.nodeDir = await mkdtemp(path.join(os.tmpdir(), 'life-node-'));
    this.stateDir = path.join(this.nodeDir, 'shim-state');
    this.logDir = path.join(this.nodeDir, 'log');
    await mkdir(this.logDir);
    await mkdir(path.join(this.nodeDir, 'azure-vnet'));
    await execa('mount', ['-t', 'tmpfs', '-o', 'size=4m,mode=0755', 'tmpfs', this.logDir]);
    this.net.defer(() => execa('umount', ['-l', this.logDir], { reject: false }));
    this.secondBuild = path.join(this.nodeDir, 'ipam-shim-build-2');
    await copyFile(path.join(ROOT, 'dist/ipam-shim'), this.secondBuild);
    await writeFile(this.secondBuild, '\n#ipam-shim node-life build 2\n', { flag: 'a' });
    await execa('chmod', ['0755', this.secondBuild]);
    await mkdir(path.join(CNI_CACHE, 'results'), { recursive: true });
    this.node = await this.net.netns('lifenode');
    this.vnet = await vnetBridge(this.net, this.node, '10.240.1.0/24');
    this.net.defer(() => execa('ip', ['netns', 'del', `ipam-shim-agent-${this.healthOwner}`], { reject: false }));
    log(`node life: node ${this.node}, vnet ${this.vnet}, image ${this.image}`);
  }

  /** containerd starts with an empty conf dir (the node boots before cilium-agent or CNS wrote a conflist). */
  async startRuntime(): Promise<void> {
    this.bed = await CriBed.create({
      node: this.node,
      containerdBinDir: this.o.containerdBinDir,
      pluginDir: this.o.pluginDir,
      cilium: this.o.ciliumLine,
      confList: () => undefined,
    });
    await mkdir(this.bed.dataDir, { recursive: true });
    // The agent installs the shim; cilium-cni's delegated IPAM is the flaky wrapper (a file of its own: it runs in the
    // agent's image too).
    await rm(path.join(this.bed.binDir, 'ipam-shim'), { force: true });
    await copyFile(path.join(FIXTURE_BIN, 'flaky-ipam'), this.flaky);
    await execa('chmod', ['0755', this.flaky]);
  }

  /**
   * The newest list version the line's cilium-cni takes: 1.0.0 on 1.17, 1.1.0 (STATUS reaches the plugins) on newer.
   */
  get topVersion(): '1.0.0' | '1.1.0' {
    return this.o.ciliumLine === '1.17' ? '1.0.0' : '1.1.0';
  }

  /** cilium-agent's conflist (topVersion) or CNS's (AKS's 0.3.1), without the shim, written as they write it (rename). */
  async writeCiliumConflist(cniVersion: '0.3.1' | '1.0.0' | '1.1.0'): Promise<void> {
    const ipam = {
      type: 'flaky-ipam',
      dataDir: this.bed.dataDir,
      ranges: [[{ subnet: '10.240.0.0/16', rangeStart: this.ipOf(this.o.rangeStart), rangeEnd: this.ipOf(this.o.rangeEnd) }]],
      routes: [{ dst: '0.0.0.0/0' }],
    };
    const list = { cniVersion, name: this.bed.network, plugins: [ciliumCni(ipam)] };
    const tmp = path.join(this.bed.confDir, `.cilium.${uid()}.tmp`);
    await writeFile(tmp, `${JSON.stringify(list, null, 2)}\n`);
    await rename(tmp, this.bed.confListPath);
  }

  async conflistTypes(): Promise<string[]> {
    try {
      return (JSON.parse(await readFile(this.bed.confListPath, 'utf8')) as { plugins: Array<{ type: string }> }).plugins.map((p) => p.type);
    } catch {
      return [];
    }
  }

  /**
   * The agent's container as the DaemonSet runs it (its securityContext and host paths), `binary` mounted over the
   * image's executable for a second build's rollout.
   */
  async runAgent(mode: 'report' | 'apply' | 'confirmed', binary?: string): Promise<void> {
    const ds = await daemonSet();
    const nodePaths: Record<string, string> = {
      '/opt/cni/bin': this.bed.binDir,
      '/etc/cni/net.d': this.bed.confDir,
      [CNI_CACHE]: CNI_CACHE,
      '/var/log/ipam-shim': this.logDir,
      '/run/netns': '/run/netns',
      '/var/run/azure-vnet': path.join(this.nodeDir, 'azure-vnet'),
    };
    const hostDir = (p: string) => {
      if (!nodePaths[p]) throw new Error(`the node life has nothing standing for the DaemonSet's host path ${p}`);
      return nodePaths[p];
    };
    const run = await this.podman.podman(
      [
        'run',
        '--detach',
        '--name',
        this.container,
        ...podmanSecurityArgs(ds),
        '--network',
        `ns:/run/netns/${this.node}`,
        ...podmanMountArgs(ds, hostDir),
        '--volume',
        `${this.nodeDir}:${this.nodeDir}`,
        '--volume',
        `${this.bed.dataDir}:${this.bed.dataDir}`,
        '--volume',
        `${this.o.pluginDir}:${this.o.pluginDir}:ro`,
        ...(binary ? ['--volume', `${binary}:/usr/local/bin/ipam-shim:ro`] : []),
        this.image,
        'agent',
        '--gc',
        mode,
        ...(mode === 'confirmed' ? ['--gc-confirm-after', String(CONFIRM_AFTER_S), '--gc-confirm-passes', String(CONFIRM_PASSES)] : []),
        '--interval',
        String(AGENT_INTERVAL_S),
        '--jitter',
        '0',
        '--grace-seconds',
        String(AGENT_GRACE_S),
        '--listen',
        `127.0.0.1:${this.port}`,
        '--network',
        this.bed.network,
        '--shim-config',
        JSON.stringify({ stateDir: this.stateDir, logFile: this.logFile, reservedCIDRs: [this.o.reserved] }),
      ],
      { reject: false, timeoutMs: 60_000 },
    );
    if (run.exitCode !== 0) throw new Error(`podman run (agent): ${run.stderr}`);
    this.agentMode = mode;
    const status = String((await this.podman.podman(['exec', this.container, 'cat', '/proc/1/status'], { timeoutMs: 30_000 })).stdout);
    const caps = capabilityNames(/^CapEff:\s*(\S+)$/m.exec(status)?.[1] ?? '');
    const want = [...(ds.container.securityContext?.capabilities?.add ?? [])].sort();
    if (JSON.stringify(caps) !== JSON.stringify(want))
      throw new Error(`agent capabilities ${caps.join(',')} are not the DaemonSet's ${want.join(',')}`);
  }

  async removeAgent(): Promise<void> {
    const r = await this.podman.podman(['rm', '--force', '--time', '5', this.container], { reject: false, timeoutMs: 60_000 });
    if (r.exitCode !== 0) throw new Error(`podman rm (agent): ${r.stderr}`);
  }

  /**
   * A pod lost behind containerd's back (a crash that wiped the runtime's state): its result cache entry and its
   * network namespace's path gone, no DEL. Its sandbox stays in containerd; only the agent's GC can release it.
   */
  async loseBehindRuntime(p: { id: string; netnsPath: string }): Promise<void> {
    await rm(path.join(CNI_CACHE, 'results', `${this.network}-${p.id}-eth0`), { force: true });
    await execa('umount', [p.netnsPath], { reject: false });
    await rm(p.netnsPath, { force: true });
  }

  async killAgent(): Promise<void> {
    await this.podman.podman(['kill', this.container], { reject: false, timeoutMs: 30_000 });
  }

  /** Started again (after killAgent), as kubelet restarts a container: podman start, like test/node does. */
  async startAgent(): Promise<void> {
    const r = await this.podman.podman(['start', this.container], { reject: false, timeoutMs: 60_000 });
    if (r.exitCode !== 0) throw new Error(`podman start (agent): ${r.stderr}`);
  }

  /** The agent's container stopped (SIGTERM) and started again. */
  async restartAgent(): Promise<void> {
    await this.podman.podman(['stop', '--time', '5', this.container], { reject: false, timeoutMs: 30_000 });
    await this.startAgent();
  }

  async agentPid(): Promise<number | undefined> {
    const r = await this.podman.podman(['inspect', '--format', '{{.State.Pid}}', this.container], { reject: false, timeoutMs: 30_000 });
    const pid = Number(String(r.stdout).trim());
    return r.exitCode === 0 && pid > 0 ? pid : undefined;
  }

  async agentLogs(lines = 30): Promise<string> {
    return String((await this.podman.podman(['logs', '--tail', String(lines), this.container], { reject: false, timeoutMs: 30_000 })).stdout);
  }

  /** The agent's /healthz or /metrics, from a client in the node's netns (where it listens). */
  async scrape(urlPath: string): Promise<{ status: number; body: string }> {
    const code = `fetch(${JSON.stringify(`http://127.0.0.1:${this.port}${urlPath}`)}).then(async (r) => process.stdout.write(r.status + '\\n' + (await r.text())))`;
    const r = await execa('nsenter', [`--net=/run/netns/${this.node}`, process.execPath, '-e', code], { timeout: 10_000, reject: false });
    if (r.exitCode !== 0) return { status: 0, body: String(r.stderr) };
    const out = String(r.stdout);
    const nl = out.indexOf('\n');
    return { status: Number(out.slice(0, nl)), body: out.slice(nl + 1) };
  }

  async metric(name: string): Promise<number> {
    const { status, body } = await this.scrape('/metrics');
    if (status !== 200) return Number.NaN;
    return body
      .split('\n')
      .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  }

  /** `ipam-shim agent-ip allocate` in the agent's container, as `kubectl exec` into cilium-agent's pod would. */
  async allocateHealth(): Promise<{ ips: string[]; out: string }> {
    const r = await this.podman.podman(
      [
        'exec',
        this.container,
        '/usr/local/bin/ipam-shim',
        'agent-ip',
        'allocate',
        '--owner',
        this.healthOwner,
        '--network',
        this.bed.network,
        '--json',
      ],
      { reject: false, timeoutMs: 60_000 },
    );
    if (r.exitCode !== 0) throw new Error(`agent-ip allocate exited ${r.exitCode}: ${r.stdout}\n${r.stderr}`);
    return { ips: (JSON.parse(String(r.stdout)) as { ips: string[] }).ips, out: String(r.stdout) };
  }

  get healthRecord(): string {
    return `cilium-agent-${this.healthOwner}:eth0`;
  }

  /** azure-vnet's leftovers for `ip` (bridge mode): its two ebtables rules and a PERMANENT neighbour on azure0. */
  async plantResidue(ip: string): Promise<void> {
    const rules = [
      ['-p', 'ARP', '--arp-op', 'Request', '--arp-ip-dst', ip, '-j', 'arpreply', '--arpreply-mac', DEAD_MAC, '--arpreply-target', 'DROP'],
      ['-p', 'IPv4', '-i', 'eth0', '--ip-dst', ip, '-j', 'dnat', '--to-dst', DEAD_MAC, '--dnat-target', 'ACCEPT'],
    ];
    for (const rule of rules) await retry(() => inNs(this.node, 'ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...rule]));
    await retry(() => inNs(this.node, 'ip', ['neigh', 'replace', ip, 'lladdr', DEAD_MAC, 'dev', 'azure0', 'nud', 'permanent']));
  }

  /** Addresses some residue names: ebtables nat rules (either form) and PERMANENT neighbours. */
  async residue(): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    const add = (ip: string, what: string) => out.set(ip, [...(out.get(ip) ?? []), what]);
    const nat = (await inNs(this.node, 'ebtables', ['-t', 'nat', '-L'])).stdout;
    for (const m of nat.matchAll(/--(?:arp-ip-dst|ip-dst) (\d+\.\d+\.\d+\.\d+)/g)) add(m[1]!, 'ebtables');
    const neigh = (await inNs(this.node, 'ip', ['-4', 'neigh', 'show', 'nud', 'permanent'])).stdout;
    for (const m of neigh.matchAll(/^(\d+\.\d+\.\d+\.\d+) dev (\S+)/gm)) add(m[1]!, `neigh@${m[2]}`);
    return out;
  }

  /** One ping from the VNet host. */
  async ping(ip: string): Promise<boolean> {
    return (await inNs(this.vnet, 'ping', ['-c', '1', '-W', '1', '-q', ip], { reject: false })).exitCode === 0;
  }

  async ledger(): Promise<Awaited<ReturnType<typeof readLedger>>> {
    return readLedger(this.stateDir, this.bed.network);
  }

  async store(): Promise<Map<string, string>> {
    return hostLocalStore(this.bed.dataDir, this.bed.network);
  }

  /** The shim's log lines (pino JSON; unparsable lines kept as {raw}). */
  async shimLog(): Promise<Array<Record<string, any>>> {
    const text = await readFile(this.logFile, 'utf8').catch(() => '');
    return text
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        try {
          return JSON.parse(l) as Record<string, any>;
        } catch {
          return { raw: l };
        }
      });
  }

  /** Fills the log directory's tmpfs; returns the undo. */
  async fillLogDir(): Promise<() => Promise<void>> {
    const filler = path.join(this.logDir, 'filler');
    const s = await statfs(this.logDir);
    await writeFile(filler, Buffer.alloc(Number(s.bavail) * Number(s.bsize))).catch(() => undefined);
    // whatever is left after the file's own blocks
    await writeFile(path.join(this.logDir, 'filler-2'), Buffer.alloc(64 * 1024)).catch(() => undefined);
    return async () => {
      await rm(filler, { force: true });
      await rm(path.join(this.logDir, 'filler-2'), { force: true });
    };
  }

  async cleanup(): Promise<void> {
    await this.removeAgent().catch(() => undefined);
    await this.podman?.cleanup().catch(() => undefined);
    await this.bed?.cleanup().catch(() => undefined);
    await this.net.cleanup();
    if (this.nodeDir) await rm(this.nodeDir, { recursive: true, force: true });
  }
}

/** CPU time (ms) of `pid` and its reaped children: utime + stime + cutime + cstime. */
export async function cpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 1000) / 100;
}

/** Open fds and RSS (KiB) of `pid`. */
export async function fdsAndRss(pid: number): Promise<{ fds: number; rssKiB: number } | undefined> {
  try {
    const { readdir } = await import('node:fs/promises');
    const fds = (await readdir(`/proc/${pid}/fd`)).length;
    const rssKiB = Number(/^VmRSS:\s+(\d+)/m.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1] ?? Number.NaN);
    return { fds, rssKiB };
  } catch {
    return undefined;
  }
}

async function retry<T>(fn: () => Promise<T>, tries = 5): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (e) {
      if (i >= tries) throw e;
      await new Promise((r) => setTimeout(r, 100 * i));
    }
  }
}
