// A node's whole life through real parts (issue 36): boot → churn (with a conflist rewrite storm, the shim's own
// upgrade and rollback, and faults) → reboot → the runtime's start-up GC → pods re-created → drain, with the
// invariants checked while it runs and at the end. The node is test/life/node.ts; the kubelet is this file (CRI
// Status polled every 100 ms until Ready, then every 5 s; RunPodSandbox with retries; StopPodSandbox retried until it
// succeeds, then RemovePodSandbox). The report: test/life/report.ts.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Pod } from '../support/runtimes/cri/bed.js';
import { ROOT } from '../support/shim/cni.js';
import { disagreements } from '../support/shim/robust.js';
import { CnitoolRuntime, HarnessError } from '../support/runtimes/cnitool.js';
import { AGENT_GRACE_S, AGENT_INTERVAL_S, CONFIRM_AFTER_S, CONFIRM_PASSES, cpuMs, fdsAndRss, LifeNode } from './node.js';
import { LifeRecord, quantile } from './report.js';
import type { CiliumLine } from '../support/shim/cilium.js';

export interface LifeOptions {
  containerdBinDir: string;
  pluginDir: string;
  /** The Cilium line in cilium-cni's place (its stand-in): 1.17 lists at 0.3.1/1.0.0, newer at 0.3.1/1.1.0. */
  ciliumLine: CiliumLine;
  /** Churn length in seconds (the rest of the life is fixed work). */
  churnSeconds: number;
  /** Most pods alive at once. */
  maxPods: number;
  /** Kubelet workers creating and deleting at once. */
  concurrency: number;
  outDir: string;
  log?: (s: string) => void;
}

interface LivePod extends Pod {
  startedAt: number;
  pingMs?: number;
  residueAtAdd?: string[];
  /** The shim ran this pod's ADD: its ledger held the attachment when RunPodSandbox returned. */
  shimRan: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PING_BOUND_MS = 15_000;
const PING_BOUND_SHIM_MS = 8_000;
/** kubelet-like churn deletes only pods that have run this long, so every pod gets its ping checked. */
const MIN_POD_AGE_MS = PING_BOUND_SHIM_MS + 1_000;
/** Residue naming a live pod's address must be gone within this after it started (the agent's passes cover a storm). */
const RESIDUE_BOUND_MS = (3 * AGENT_INTERVAL_S + 5) * 1000;
const STATUS_MAX_MS = 5_000;

export async function runLife(o: LifeOptions): Promise<{ record: LifeRecord; text: string; jsonPath: string; failed: string[] }> {
  const log = o.log ?? ((s: string) => console.log(s));
  const R = new LifeRecord(log);
  if (o.maxPods > 120) throw new Error('the life runs in 10.240.1.0/24: at most 120 live pods');
  const size = Math.max(24, 2 * o.maxPods + 12);
  const rangeStart = 10;
  const rangeEnd = rangeStart + size - 1;
  const reserved = '10.240.1.20/30';
  const node = new LifeNode({
    containerdBinDir: o.containerdBinDir,
    pluginDir: o.pluginDir,
    ciliumLine: o.ciliumLine,
    rangeStart,
    rangeEnd,
    reserved,
  });
  const live = new Map<string, LivePod>();
  const planted = new Set<string>();
  let healthIps: string[] = [];
  /** Windows [from, to] (ms since start) in which an injected fault explains NotReady / an error. */
  const windows: Array<{ kind: string; from: number; to: number; ids?: Set<string> }> = [];
  const openWindow = (kind: string) => {
    const w = { kind, from: R.now(), to: Number.POSITIVE_INFINITY, ids: new Set<string>() };
    windows.push(w);
    R.event('fault', `${kind} start`);
    return () => {
      w.to = R.now();
      R.event('fault', `${kind} end`);
    };
  };
  const killedAdds = new Set<string>();
  let stopping = false;

  // ---- the kubelet's CRI Status poller (runs the whole life) ----
  const statusSamples: Array<{ t: number; ms: number; ready?: boolean; message?: string; error?: string }> = [];
  let fastPoll = true;
  let pollerDone: Promise<void> = Promise.resolve();
  const startPoller = () => {
    pollerDone = (async () => {
      while (!stopping) {
        const t = R.now();
        const started = performance.now();
        try {
          const c = (await node.bed.cri.status(10_000)).find((x) => x.type === 'NetworkReady');
          const ready = c?.status === true;
          statusSamples.push({ t, ms: performance.now() - started, ready, ...(ready ? {} : { message: c?.message ?? 'no NetworkReady' }) });
          if (ready && fastPoll) {
            fastPoll = false;
            R.event('ready', `NetworkReady after ${t} ms`);
          }
        } catch (e) {
          statusSamples.push({ t, ms: performance.now() - started, error: (e as Error).message });
        }
        await sleep(fastPoll ? 100 : 5_000);
      }
    })();
  };
  const waitReady = async (ms = 60_000) => {
    const end = Date.now() + ms;
    while (fastPoll && Date.now() < end) await sleep(50);
    if (fastPoll) throw new Error(`the node did not become Ready within ${ms} ms; last status: ${JSON.stringify(statusSamples.at(-1))}`);
  };

  // ---- kubelet: pods ----
  let podSerial = 0;
  const chained = async () => (await node.conflistTypes()).includes('ipam-shim');
  async function createPod(name = `life-${++podSerial}`): Promise<LivePod | undefined> {
    // kubelet retries for as long as the pod exists; 8 tries get past the reserved /30 (4 refusals in a row at most)
    for (let attempt = 0; attempt < 8 && !stopping; attempt++) {
      const chainedBefore = await chained();
      try {
        const pod = await node.bed.runPod(name, { metadata: { name, uid: `${name}-uid`, namespace: 'default', attempt } });
        // The conflist read before the call is no evidence of what containerd ran: a rewrite between that read and
        // containerd's own (a storm) starts the pod without the shim. Its record in the ledger is.
        const shimRan = (await shimRecorded(pod.id)) ?? chainedBefore;
        if (!shimRan) R.count(chainedBefore ? 'addsWithoutShimAfterRewrite' : 'addsWithoutShim');
        const p: LivePod = { ...pod, startedAt: R.now(), shimRan };
        R.count('podsCreated');
        afterAdd(p);
        return p;
      } catch (e) {
        R.count('runPodSandboxFailures');
        R.event('run-failed', `${name}: ${(e as Error).message.slice(0, 300)}`);
        // kubelet's GC of the failed attempt's sandbox (containerd usually removed it already)
        for (const s of await node.bed.cri.listPodSandbox().catch(() => [])) {
          if (s.metadata.name === name && !live.has(s.id)) await deletePod(s.id, false).catch(() => undefined);
        }
        await sleep(300);
      }
    }
    return undefined;
  }
  /**
   * Whether the shim's ledger holds the pod's attachment; undefined when the ledger could not be read (a file the
   * shim renamed or removed between the listing and the read, three times running). Never a RunPodSandbox failure:
   * the pod was created (a thrown read here once made the runner count it failed and remove it).
   */
  async function shimRecorded(id: string): Promise<boolean | undefined> {
    for (let i = 0; i < 3; i++) {
      try {
        return (await node.ledger()).records.has(`${id}:eth0`);
      } catch (e) {
        if (i === 2) R.event('error', `ledger read for ${id.slice(0, 12)}: ${(e as Error).message}`);
        await sleep(50);
      }
    }
    return undefined;
  }
  function afterAdd(p: LivePod): void {
    live.set(p.id, p);
    R.event('pod', `+${p.name} ${p.ips.join(',')}`);
    void (async () => {
      const ip = p.ips[0]!;
      // residue for a reused address: gone at ADD when the shim is chained
      const res = (await node.residue().catch(() => new Map<string, string[]>())).get(ip);
      if (planted.has(ip)) {
        R.count(res ? 'residueLeftAtAdd' : 'residueCuredAtAdd');
        p.residueAtAdd = res;
        if (!res) planted.delete(ip);
        R.check(
          'residue-at-add',
          'an ADD through the shim leaves no residue naming the address it hands out',
          res && p.shimRan ? `${p.name} got ${ip}, residue ${res.join(',')} still there after ADD through the shim` : undefined,
        );
      }
      const t0 = Date.now();
      // Through the shim a pod answers at once; one started without it (a storm) waits for the agent's pass.
      const bound = p.shimRan ? PING_BOUND_SHIM_MS : PING_BOUND_MS;
      while (live.has(p.id) && Date.now() - t0 < bound) {
        if (await node.ping(ip)) {
          p.pingMs = Date.now() - t0;
          R.check(
            'ping',
            `every live pod answers ping from the VNet host within ${PING_BOUND_SHIM_MS} ms of its start (${PING_BOUND_MS} ms if started without the shim)`,
          );
          R.count('pingsAnswered');
          return;
        }
        await sleep(250);
      }
      // Deleted unanswered after its bound had passed is a failure too (churn must not hide it).
      if (live.has(p.id) || Date.now() - t0 >= bound)
        R.check(
          'ping',
          `every live pod answers ping from the VNet host within ${PING_BOUND_SHIM_MS} ms of its start (${PING_BOUND_MS} ms if started without the shim)`,
          `${p.name} ${ip} unanswered for ${Date.now() - t0} ms (shim ran its ADD: ${p.shimRan})`,
        );
      else R.count('pingsNotChecked');
    })().catch((e) => R.event('error', `pinger: ${(e as Error).message}`));
  }
  async function deletePod(id: string, plant = true): Promise<void> {
    const p = live.get(id);
    live.delete(id);
    // azure-vnet's leftovers for an address about to be handed out again: planted while the address is still held,
    // so no ADD can be given it before its residue is there (planting after the release raced the next ADD).
    if (p && plant && Math.random() < 0.5) {
      for (const ip of p.ips) {
        await node.plantResidue(ip).catch((e) => R.event('error', `plant: ${(e as Error).message}`));
        planted.add(ip);
        R.count('residuePlanted');
      }
    }
    for (let i = 0; ; i++) {
      try {
        await node.bed.cri.stopPodSandbox(id);
        break;
      } catch (e) {
        R.count('stopRetries');
        if (i > 30) throw e;
        await sleep(500);
      }
    }
    await node.bed.cri.removePodSandbox(id);
    if (p) {
      R.count('podsDeleted');
      R.event('pod', `-${p.name}`);
    }
  }

  // ---- invariant checks that read the whole node ----
  async function checkAddresses(where: string): Promise<void> {
    const what = 'no address held by two live pods; the runtime, host-local and the ledger agree on every live pod';
    // The pods first: one that RunPodSandbox returns while the store is read is not in the store's snapshot.
    const pods = [...live.values()];
    const [store, ledger] = [await node.store(), await node.ledger()];
    const owner = new Map<string, string>();
    for (const p of pods) {
      for (const ip of p.ips) {
        if (owner.has(ip)) R.check('addresses', what, `${where}: ${ip} held by ${owner.get(ip)} and ${p.name}`);
        owner.set(ip, p.name);
        if (!live.has(p.id)) continue; // deleted while we read
        const held = store.get(ip);
        if (held !== undefined && held !== `${p.id}:eth0`)
          R.check('addresses', what, `${where}: host-local has ${ip} for ${held}, the runtime gave it to ${p.name}`);
        if (held === undefined && live.has(p.id)) R.check('addresses', what, `${where}: host-local holds nothing for live ${p.name}'s ${ip}`);
        for (const [key, rec] of ledger.records)
          if (rec.ips.includes(ip) && key !== `${p.id}:eth0` && live.has(p.id))
            R.check('addresses', what, `${where}: ledger ${key} holds ${ip} of ${p.name}`);
      }
    }
    R.check('addresses', what);
    R.samples.push({ t: R.now(), live: live.size, ready: statusSamples.at(-1)?.ready, held: store.size });
  }
  async function checkResidue(where: string): Promise<void> {
    const what = `no residue rule or neighbour names a live pod's address ${RESIDUE_BOUND_MS} ms after it started`;
    const res = await node.residue();
    for (const p of live.values()) {
      const r = res.get(p.ips[0]!);
      if (r && R.now() - p.startedAt > RESIDUE_BOUND_MS && live.has(p.id))
        R.check(
          'residue',
          what,
          `${where}: ${p.name} ${p.ips[0]} (started ${R.now() - p.startedAt} ms ago, shim ran its ADD: ${p.shimRan}) named by ${r.join(',')}`,
        );
    }
    R.check('residue', what);
  }

  // ---- agent fds / RSS ----
  const agentSamples: Array<{ t: number; pid: number; fds: number; rssKiB: number }> = [];
  async function sampleAgent(): Promise<void> {
    const pid = await node.agentPid();
    if (!pid) return;
    const s = await fdsAndRss(pid);
    if (s) agentSamples.push({ t: R.now(), pid, ...s });
  }

  let sampler: Promise<void> = Promise.resolve();
  let sampling = false;
  const startSampler = () => {
    sampling = true;
    sampler = (async () => {
      while (sampling) {
        await checkAddresses('periodic').catch((e) => R.event('error', `check: ${(e as Error).message}`));
        await checkResidue('periodic').catch((e) => R.event('error', `check: ${(e as Error).message}`));
        await sampleAgent().catch(() => undefined);
        await sleep(3_000);
      }
    })();
  };

  const waitPasses = async (n: number, ms = 60_000) => {
    const start = await node.metric('ipam_shim_agent_reconcile_passes_total');
    const end = Date.now() + ms;
    while (Date.now() < end) {
      const now = await node.metric('ipam_shim_agent_reconcile_passes_total');
      if (now >= (Number.isNaN(start) ? 0 : start) + n) return;
      await sleep(250);
    }
    throw new Error(`the agent did not make ${n} passes within ${ms} ms\n${await node.agentLogs()}`);
  };
  const waitChained = async (ms = 30_000) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if (await chained()) {
        const text = await readFile(node.bed.confListPath, 'utf8');
        const loaded = await node.bed.loadedConfList().catch(() => ({ source: undefined }));
        if (loaded.source === text) return;
      }
      await sleep(100);
    }
    throw new Error(`the agent did not chain the shim within ${ms} ms\n${await node.agentLogs()}`);
  };

  const meta = {
    churnSeconds: o.churnSeconds,
    maxPods: o.maxPods,
    concurrency: o.concurrency,
    range: `${node.ipOf(rangeStart)}-${node.ipOf(rangeEnd)}`,
    reserved,
    ciliumLine: o.ciliumLine,
    containerd: '',
  };
  let crashed: Error | undefined;
  try {
    await node.prepare(log);

    // ---- boot ----
    await R.phase(
      'boot',
      async (p) => {
        const t0 = R.now();
        await node.startRuntime();
        meta.containerd = node.bed.containerd.version;
        p.notes.containerdUpMs = R.now() - t0;
        const bootWindow = openWindow('boot: no conflist yet');
        startPoller();
        await sleep(2_000); // cilium-agent starting
        const written = R.now();
        await node.writeCiliumConflist(node.topVersion);
        R.event('conflist', `cilium writes ${node.topVersion} (no shim)`);
        await waitReady();
        bootWindow();
        p.notes.readyAfterConflistMs = (statusSamples.find((s) => s.ready)?.t ?? Number.NaN) - written;
        p.notes.fastPollCalls = statusSamples.length;
        const agentT = R.now();
        await node.runAgent('report');
        await waitChained();
        p.notes.shimChainedMs = R.now() - agentT;
        R.event('agent', 'shim chained');

        // cilium-agent's health address over an address with azure-vnet residue (host-local hands out rangeStart first).
        const first = node.ipOf(rangeStart);
        await node.plantResidue(first);
        const health = await node.allocateHealth();
        healthIps = health.ips;
        const after = await node.residue();
        const left = healthIps.flatMap((ip) => (after.get(ip) ?? []).map((w) => `${ip}:${w}`));
        R.check(
          'health-residue',
          "cilium-agent's health address is handed out with no residue left for it (agent-ip allocate runs the cures)",
          healthIps.includes(first) && left.length ? `agent-ip allocate gave ${healthIps.join(',')}; residue left: ${left.join(' ')}` : undefined,
        );
        R.invariant('health-residue', '').evidence = { healthIps, planted: first, leftAfterAllocate: left };
        await waitPasses(2).catch((e) => R.event('error', (e as Error).message));
        const afterPass = await node.residue();
        R.invariant('health-residue', '').evidence.leftAfterTwoAgentPasses = healthIps.flatMap((ip) => afterPass.get(ip) ?? []);
        p.notes.healthIps = healthIps.join(',');
        R.event('health', `agent-ip allocate: ${healthIps.join(',')}; residue left ${left.length ? left.join(' ') : 'none'}`);

        // STATUS through the whole list (the shim chained) during a kubelet fast poll: calls and containerd's CPU.
        const pid = node.bed.daemonPid!;
        const statusDone = async () => (await node.shimLog()).filter((l) => l.command === 'STATUS' && l.msg === 'CNI call done').length;
        const statusBefore = await statusDone();
        const cpu0 = await cpuMs(pid);
        const tFast = Date.now();
        let calls = 0;
        const lat: number[] = [];
        while (Date.now() - tFast < 5_000) {
          const s0 = performance.now();
          await node.bed.cri.status(10_000);
          lat.push(performance.now() - s0);
          calls++;
          await sleep(100);
        }
        const cpu = (await cpuMs(pid)) - cpu0;
        const shimStatus = (await statusDone()) - statusBefore;
        p.notes.fastPoll = {
          criStatusCalls: calls,
          shimStatusCalls: shimStatus,
          containerdCpuMs: Math.round(cpu),
          cpuMsPerCall: Number((cpu / Math.max(1, calls)).toFixed(1)),
          cpuShareOfOneCore: Number((cpu / (Date.now() - tFast)).toFixed(3)),
          p50Ms: Math.round(quantile(lat, 0.5)),
          maxMs: Math.round(Math.max(...lat)),
        };
      },
      300_000,
    );

    // ---- churn, with the storm, the upgrade and rollback, and faults ----
    startSampler();
    await R.phase(
      'churn',
      async (p) => {
        const begin = Date.now();
        const end = begin + o.churnSeconds * 1000;
        let running = true;
        const worker = async () => {
          while (running && Date.now() < end) {
            const want = live.size < o.maxPods && (live.size < o.maxPods / 2 || Math.random() < 0.55);
            if (want) await createPod();
            else {
              const ids = [...live.values()].filter((x) => R.now() - x.startedAt > MIN_POD_AGE_MS).map((x) => x.id);
              const id = ids[Math.floor(Math.random() * ids.length)];
              if (id) await deletePod(id).catch((e) => R.event('error', `delete: ${(e as Error).message}`));
            }
            await sleep(200 + Math.random() * 600);
          }
        };
        const workers = Array.from({ length: o.concurrency }, worker);

        // One round of faults per cycle of about two minutes: a long life repeats them.
        const cycles = Math.max(1, Math.round(o.churnSeconds / 120));
        const segment = (o.churnSeconds * 1000) / cycles;
        p.notes.cycles = cycles;
        const scenario = async () => {
          for (let c = 0; c < cycles; c++) await round((f) => begin + (c + f) * segment, c === 0 || c === cycles - 1);
        };
        // The agent's own upgrade and restart only in the first and last rounds: the run between is the long one in
        // which its fds and RSS must stay flat.
        const round = async (at: (f: number) => number, agentFaults: boolean) => {
          // the delegate fails about one ADD in 20 from 10 % to 90 %
          await sleepUntil(at(0.1));
          await writeFile(`${node.flaky}.rate`, '20\n');
          const flakyDone = openWindow('delegate fails 1 in 20');
          // a shim killed mid-ADD
          await sleepUntil(at(0.15));
          await killShimMidAdd();
          // rewrite storm: the conflist rewritten without the shim, as CNS and cilium-agent restarts do
          await sleepUntil(at(0.2));
          await R.phase('storm', async (sp) => {
            const n = 8;
            for (let i = 0; i < n; i++) {
              await node.writeCiliumConflist(i % 2 ? node.topVersion : '0.3.1');
              R.count('conflistRewrites');
              await sleep(400 + Math.random() * 800);
            }
            await node.writeCiliumConflist(node.topVersion);
            const t = R.now();
            await waitChained();
            sp.notes.rewrites = n + 1;
            sp.notes.rechainedAfterLastMs = R.now() - t;
          });
          // the log directory full for a while
          await sleepUntil(at(0.4));
          const logFullDone = openWindow('log directory full');
          const undoFill = await node.fillLogDir();
          await sleep(Math.min(10_000, segment / 10));
          await undoFill();
          logFullDone();
          // the shim's own upgrade (a second build, rolled out as the DaemonSet would), then the rollback
          await sleepUntil(at(0.5));
          if (agentFaults)
            await R.phase('upgrade', async (up) => {
              const w = openWindow('upgrade');
              const t = R.now();
              await node.removeAgent();
              await node.runAgent('report', node.secondBuild);
              await waitInstalled(node.secondBuild);
              up.notes.rolledOutMs = R.now() - t;
              await sleep(Math.max(3_000, segment / 10));
              const t2 = R.now();
              await node.removeAgent();
              await node.runAgent('report');
              await waitInstalled(path.join(ROOT, 'dist/ipam-shim'));
              up.notes.rolledBackMs = R.now() - t2;
              w();
            });
          await sleepUntil(at(0.65));
          await killShimMidAdd();
          // the agent restarted
          await sleepUntil(at(0.8));
          if (agentFaults) {
            const restart = openWindow('agent restart');
            await node.restartAgent();
            await waitPasses(1).catch((e) => R.event('error', (e as Error).message));
            restart();
          }
          await sleepUntil(at(0.9));
          await rm(`${node.flaky}.rate`, { force: true });
          flakyDone();
        };
        try {
          await Promise.all([scenario(), ...workers]);
        } finally {
          running = false;
        }
        p.notes.live = live.size;
      },
      (o.churnSeconds + 240) * 1000,
    );

    // ---- reboot ----
    const survivors = live.size;
    let oldSandboxes: string[] = [];
    await R.phase(
      'reboot',
      async (p) => {
        const w = openWindow('reboot');
        const t0 = R.now();
        await node.killAgent();
        const ids = [...live.keys()];
        live.clear();
        oldSandboxes = ids;
        await node.bed.reboot();
        fastPoll = true;
        p.notes.containerdBackMs = R.now() - t0;
        await node.startAgent();
        await waitReady();
        p.notes.readyMs = R.now() - t0;
        w();
        const listed = await node.bed.cri.listPodSandbox();
        p.notes.sandboxesListed = listed.length;
        p.notes.notReady = listed.filter((s) => s.state === 'SANDBOX_NOTREADY').length;
        p.notes.podsBefore = survivors;
      },
      180_000,
    );

    // ---- the runtime's start-up GC, CRI-O-shaped through the real libcni ----
    // libcni sends the GC verb only to a 1.1.0 list (the newer line's): there the shim's GC releases what no cache
    // entry names. On 1.17's 1.0.0 list GCNetworkList only DELs the cached attachments; the one whose cache entry
    // was lost stays allocated for the runtime's own DEL of its sandbox (recreate) or the agent's GC (drain: leaks).
    await R.phase(
      'startup-gc',
      async (p) => {
        const gcVerb = node.topVersion === '1.1.0';
        const what = gcVerb
          ? 'the runtime start-up GC (libcni GCNetworkList, the pods that survived as the valid list) succeeds and leaves no dead pod allocated'
          : 'the runtime start-up GC (libcni GCNetworkList on a 1.0.0 list: DELs of the cached attachments, no GC verb) succeeds and leaves no dead pod with a cache entry allocated';
        const cacheDir = await mkdtemp(path.join(os.tmpdir(), 'life-gc-'));
        try {
          await mkdir(path.join(cacheDir, 'results'));
          const entries = (await readdir('/var/lib/cni/results')).filter((f) => f.startsWith(`${node.network}-`));
          // One cache entry lost with the reboot (a node that crashed mid-write): only the shim's GC can release it.
          const lost = entries.find((f) => oldSandboxes.some((id) => f.includes(id)));
          const lostId = lost ? oldSandboxes.find((id) => lost.includes(id)) : undefined;
          for (const f of entries) if (f !== lost) await copyFile(path.join('/var/lib/cni/results', f), path.join(cacheDir, 'results', f));
          const confList = JSON.parse(await readFile(node.bed.confListPath, 'utf8'));
          const crio = new CnitoolRuntime({ confList, pluginDirs: [node.bed.binDir], cacheDir, netns: node.node, env: node.bed.ciliumEnv });
          // No pod survived a reboot: CRI-O's ocicni passes a nil list.
          let error: string | undefined;
          try {
            const r = await crio.gc(undefined);
            p.notes.libcniDeleted = r.deleted.length;
          } catch (e) {
            const deleted = (e as { deleted?: unknown[] }).deleted;
            error = e instanceof HarnessError ? `code ${e.code}: ${e.msg}${e.details ? ` (${e.details})` : ''}` : (e as Error).message;
            p.notes.libcniDeleted = deleted?.length;
          }
          p.notes.gcSentTo = crio.invocations.filter((i) => i.command === 'GC').map((i) => i.plugin);
          p.notes.validAttachments = JSON.stringify(
            crio.invocations.find((i) => i.command === 'GC' && i.plugin === 'ipam-shim')?.stdin['cni.dev/valid-attachments'] ?? 'absent',
          );
          const store = await node.store();
          // Without the GC verb the lost entry's pod keeps its address here: only its own attachment may stay.
          const waiting = (k: string) => !gcVerb && lostId !== undefined && k === `${lostId}:eth0`;
          const dead = [...store.entries()].filter(([ip, k]) => !healthIps.includes(ip) && !waiting(k)).map(([ip, k]) => `${ip}:${k}`);
          p.notes.heldAfter = dead.length;
          p.notes.leftForTheRuntimesDel = [...store.values()].filter(waiting).length;
          R.check('startup-gc', what, error ? `GCNetworkList failed: ${error}` : undefined);
          R.check('startup-gc', what, dead.length ? `still allocated after the GC, no pod alive: ${dead.join(' ')}` : undefined);
          const sent = (p.notes.gcSentTo as string[]).length > 0;
          R.check('startup-gc', what, sent !== gcVerb ? `GC verb sent to [${p.notes.gcSentTo}] on a ${node.topVersion} list` : undefined);
          R.invariant('startup-gc', what).evidence = { ...p.notes, lostCacheEntry: lost ?? 'none', error: error ?? 'none' };
        } finally {
          await rm(cacheDir, { recursive: true, force: true });
        }
      },
      180_000,
    );

    // ---- kubelet after the reboot: old sandboxes stopped and removed, pods re-created ----
    await R.phase(
      'recreate',
      async (p) => {
        const t0 = R.now();
        for (const s of await node.bed.cri.listPodSandbox()) await deletePod(s.id, false);
        p.notes.oldRemovedMs = R.now() - t0;
        const t1 = R.now();
        let made = 0;
        for (let i = 0; i < survivors; i += o.concurrency) {
          const batch = await Promise.all(Array.from({ length: Math.min(o.concurrency, survivors - i) }, () => createPod()));
          made += batch.filter(Boolean).length;
        }
        p.notes.recreated = made;
        p.notes.recreateMs = R.now() - t1;
        await sleep(2_000);
        await checkAddresses('after re-creation');
      },
      240_000,
    );

    // ---- leaks released once proven: the DaemonSet's gc mode (confirmed), with the life's short window ----
    await R.phase(
      'confirmed-gc',
      async (p) => {
        const what = `gc mode confirmed releases a leak only once every pass for ${CONFIRM_AFTER_S} s (and ${CONFIRM_PASSES} passes) found it, never a live pod's or cilium-agent's address`;
        await node.removeAgent();
        await node.runAgent('confirmed');
        await waitPasses(1);
        // Two pods lost behind containerd's back (cache entry and netns path gone, no DEL): no longer live pods.
        const victims = [...live.values()].slice(0, 2);
        const leakedIps = victims.flatMap((v) => v.ips);
        for (const v of victims) {
          live.delete(v.id);
          await node.loseBehindRuntime(v);
        }
        const planted = R.now();
        R.event('leak', `planted: ${victims.map((v) => `${v.name} ${v.ips.join(',')}`).join('; ')}`);
        const timeline: Array<{ t: number; leaked: number; awaiting: number; released: number; held: number }> = [];
        let reported: number | undefined;
        let freed: number | undefined;
        const end = Date.now() + (CONFIRM_AFTER_S + AGENT_GRACE_S + (CONFIRM_PASSES + 10) * AGENT_INTERVAL_S) * 1000;
        while (victims.length && Date.now() < end) {
          const leaked = await node.metric('ipam_shim_agent_gc_leaked');
          const awaiting = await node.metric('ipam_shim_agent_gc_awaiting_confirmation');
          const released = await node.metric('ipam_shim_agent_gc_confirmed_released_total');
          const store = await node.store();
          // When the reads ended: each scrape is a process in the node's netns, a second or more on a loaded machine.
          const sample = { t: R.now() - planted, leaked, awaiting, released, held: leakedIps.filter((ip) => store.has(ip)).length };
          if (JSON.stringify({ ...timeline.at(-1), t: 0 }) !== JSON.stringify({ ...sample, t: 0 })) timeline.push(sample);
          reported ??= sample.awaiting > 0 ? R.now() : undefined;
          if (sample.held === 0) {
            freed = R.now();
            break;
          }
          await sleep(500);
        }
        const releases = (await node.agentLogs(400))
          .split('\n')
          .filter((l) => l.includes('GC released a confirmed leak'))
          .map((l) => JSON.parse(l) as { ips: string[]; passes: number; leakedForS: number });
        p.notes.planted = leakedIps.join(',');
        p.notes.reportedAfterMs = reported === undefined ? 'never' : reported - planted;
        p.notes.releasedAfterMs = freed === undefined ? 'never' : freed - planted;
        p.notes.releaseLines = JSON.stringify(releases.map((r) => ({ ips: r.ips, passes: r.passes, leakedForS: r.leakedForS })));
        R.check('confirmed-gc', what, victims.length < 2 ? `only ${victims.length} live pod(s) to lose` : undefined);
        R.check('confirmed-gc', what, reported === undefined ? 'the leaks were never reported as awaiting confirmation' : undefined);
        R.check(
          'confirmed-gc',
          what,
          freed === undefined ? `not released within ${end - planted} ms: ${JSON.stringify(timeline.at(-1))}` : undefined,
        );
        // Released no sooner than a whole window after the leaks were planted (a second's slack: `planted` is taken
        // after both losses), and by lines that say each was seen leaked for the window in enough passes (the agent's
        // own clock: the polling above only ever sees a release late).
        if (freed !== undefined && freed - planted < CONFIRM_AFTER_S * 1000 - 1_000)
          R.check('confirmed-gc', what, `released ${freed - planted} ms after the leaks were planted: before the ${CONFIRM_AFTER_S} s window`);
        const early = releases.filter((r) => r.passes < CONFIRM_PASSES || r.leakedForS < CONFIRM_AFTER_S);
        R.check('confirmed-gc', what, early.length ? `released before the window: ${JSON.stringify(early)}` : undefined);
        const lines = releases.flatMap((r) => r.ips.map((ip) => ip.split('/')[0]!));
        const unlogged = leakedIps.filter((ip) => !lines.includes(ip));
        R.check('confirmed-gc', what, freed !== undefined && unlogged.length ? `released without a log line: ${unlogged.join(',')}` : undefined);
        // Nothing else touched: every live pod's address and cilium-agent's still held, by the same attachment.
        const [store, ledger] = [await node.store(), await node.ledger()];
        for (const pod of live.values())
          for (const ip of pod.ips)
            if (store.get(ip) !== `${pod.id}:eth0`)
              R.check('confirmed-gc', what, `live ${pod.name}'s ${ip} is ${store.get(ip) ?? 'free'} in host-local`);
        for (const ip of healthIps) if (!store.has(ip)) R.check('confirmed-gc', what, `cilium-agent's ${ip} was released`);
        if (!ledger.records.has(node.healthRecord)) R.check('confirmed-gc', what, "cilium-agent's record is gone");
        R.check('confirmed-gc', what);
        R.invariant('confirmed-gc', what).evidence = { ...p.notes, timeline: JSON.stringify(timeline) };
      },
      180_000,
    );

    // ---- drain ----
    await R.phase(
      'drain',
      async (p) => {
        for (const id of [...live.keys()]) await deletePod(id, false);
        sampling = false;
        await sampler;
        await node.removeAgent();
        await node.runAgent('apply');
        await sleep(AGENT_GRACE_S * 1000);
        await waitPasses(2);
        const [store, ledger] = [await node.store(), await node.ledger()];
        const what = 'after the final agent pass (--gc apply) every allocation belongs to a live pod or to cilium-agent';
        const leaks = [...store.entries()].filter(([ip]) => !healthIps.includes(ip)).map(([ip, k]) => `host-local ${ip}:${k}`);
        const stray = [...ledger.records.keys()].filter((k) => k !== node.healthRecord).map((k) => `ledger ${k}`);
        R.check('leaks', what, leaks.length || stray.length ? `${leaks.length + stray.length} leaked: ${[...leaks, ...stray].join(' ')}` : undefined);
        // The shim's STATUS keeps its own state file beside the records (statusGraceMs): not a ledger entry.
        const dis = disagreements(ledger, store).filter((d) => !d.endsWith(`/${node.network}/.status.json`));
        R.check('leaks', what, dis.length ? `ledger and host-local disagree: ${dis.join('; ')}` : undefined);
        R.invariant('leaks', what).evidence = { held: [...store.keys()], records: [...ledger.records.keys()] };
        p.notes.held = store.size;
      },
      180_000,
    );
  } catch (e) {
    crashed = e as Error;
    R.event('crash', crashed.stack ?? crashed.message);
    log(`node life: stopped early: ${crashed.stack}`);
  } finally {
    stopping = true;
    sampling = false;
    await Promise.race([Promise.all([pollerDone, sampler]), sleep(15_000)]);
  }

  // ---- the invariants read from what was recorded ----
  evaluateReadiness();
  evaluateAgent();
  await evaluateShimErrors().catch((e) => R.event('error', `shim log: ${(e as Error).message}`));
  if (crashed) R.check('life-completed', 'every phase ran to its end', crashed.message.split('\n')[0]);
  else R.check('life-completed', 'every phase ran to its end');
  for (const name of ['addresses', 'ping', 'residue', 'leaks', 'startup-gc', 'confirmed-gc'])
    if (!R.invariants.get(name)?.checks) R.invariant(name, name).notEvaluated = 'never checked (the life stopped before it)';
  const out = await R.write(o.outDir, meta);
  await node.cleanup();
  return { record: R, text: out.text, jsonPath: out.jsonPath, failed: R.failures().map((i) => i.name) };

  function evaluateReadiness(): void {
    const what = 'NetworkReady false (or CRI Status failing) only while a fault that should cause it is injected';
    const explained = (t: number) =>
      windows.some((w) => (w.kind.startsWith('boot') || w.kind === 'reboot') && t >= w.from - 1_000 && t <= w.to + 1_000);
    for (const s of statusSamples) {
      if (s.ready === true) R.check('network-ready', what);
      else R.check('network-ready', what, explained(s.t) ? undefined : `${s.error ?? s.message}`);
    }
    const lat = statusSamples.filter((s) => !s.error).map((s) => s.ms);
    const inv = R.invariant('status-latency', `CRI Status answers within ${STATUS_MAX_MS} ms (kubelet's poll)`);
    inv.evidence = {
      calls: lat.length,
      p50Ms: Number(quantile(lat, 0.5).toFixed(1)),
      p99Ms: Number(quantile(lat, 0.99).toFixed(1)),
      maxMs: Number(Math.max(...lat).toFixed(1)),
      notReady: statusSamples.filter((s) => s.ready === false).length,
      failed: statusSamples.filter((s) => s.error).length,
    };
    for (const s of statusSamples.filter((x) => !x.error))
      R.check('status-latency', inv.what, s.ms > STATUS_MAX_MS ? `CRI Status took ${s.ms.toFixed(0)} ms` : undefined);
  }

  function evaluateAgent(): void {
    const what = "the agent's open fds and RSS stay flat within each run of its container";
    const byPid = new Map<number, typeof agentSamples>();
    for (const s of agentSamples) byPid.set(s.pid, [...(byPid.get(s.pid) ?? []), s]);
    const runs = [...byPid.values()].sort((a, b) => b.length - a.length);
    const longest = runs[0];
    if (!longest || longest.length < 4) {
      R.invariant('agent-flat', what).notEvaluated = `too few samples (${longest?.length ?? 0}) in one run of the agent`;
      return;
    }
    const warm = longest.slice(2);
    const fds = warm.map((s) => s.fds);
    const rss = warm.map((s) => s.rssKiB);
    R.invariant('agent-flat', what).evidence = {
      samples: longest.length,
      fds: { first: fds[0], max: Math.max(...fds), last: fds.at(-1) },
      rssMiB: { first: (rss[0]! / 1024).toFixed(1), max: (Math.max(...rss) / 1024).toFixed(1), last: (rss.at(-1)! / 1024).toFixed(1) },
    };
    // Growth is the floor rising: the least of the last third of the samples against the least of the first third.
    // One sample taken mid-pass (a cache file open, a child's pipes, a scrape) is not growth: a short life's
    // last sample, taken in its final pass, read 31 fds against a first of 20 while the floor stayed at 20.
    const third = Math.max(1, Math.floor(warm.length / 3));
    const floor = (xs: number[]) => Math.min(...xs);
    const [fdsFrom, fdsTo] = [floor(fds.slice(0, third)), floor(fds.slice(-third))];
    const [rssFrom, rssTo] = [floor(rss.slice(0, third)), floor(rss.slice(-third))];
    Object.assign(R.invariant('agent-flat', what).evidence, {
      fdsFloor: [fdsFrom, fdsTo],
      rssFloorMiB: [(rssFrom / 1024).toFixed(1), (rssTo / 1024).toFixed(1)],
    });
    R.check('agent-flat', what, fdsTo - fdsFrom > 8 ? `fds floor ${fdsFrom} → ${fdsTo}` : undefined);
    R.check('agent-flat', what, rssTo > rssFrom * 1.5 + 20 * 1024 ? `RSS floor ${rssFrom} → ${rssTo} KiB` : undefined);
  }

  async function evaluateShimErrors(): Promise<void> {
    const what = 'no shim error that an injected fault does not explain';
    const lines = await node.shimLog();
    const faults = new Set((await readFile(`${node.flaky}.faults`, 'utf8').catch(() => '')).split('\n').filter(Boolean));
    const reservedCode = 100;
    const kinds: Record<string, number> = {};
    for (const l of lines) {
      if (l.level !== 'error' && l.level !== 'fatal' && !(Number(l.level) >= 50)) continue;
      const t = (typeof l.time === 'string' ? Date.parse(l.time) : Number(l.time)) - R.t0;
      const why =
        l.code === reservedCode
          ? 'reserved'
          : faults.has(l.containerID)
            ? 'delegate fault'
            : killedAdds.has(l.containerID)
              ? 'killed ADD'
              : windows.find((w) => !w.kind.startsWith('delegate') && t >= w.from - 2_000 && t <= w.to + 2_000)?.kind;
      kinds[why ?? 'unexplained'] = (kinds[why ?? 'unexplained'] ?? 0) + 1;
      R.check('shim-errors', what, why ? undefined : `${l.command} ${l.containerID}: ${l.msg} ${l.cniMsg ?? ''} (code ${l.code})`);
    }
    // What kubelet saw: every failed RunPodSandbox carries its plugin's error, which a fault must explain.
    const criKinds: Record<string, number> = {};
    for (const e of R.events.filter((x) => x.kind === 'run-failed')) {
      const d = e.detail ?? '';
      const why = /inside reserved CIDR/.test(d)
        ? 'reserved'
        : /signal: killed/.test(d)
          ? 'killed ADD'
          : /flaky-ipam: injected failure/.test(d)
            ? 'delegate fault'
            : windows.find((w) => !w.kind.startsWith('delegate') && e.t >= w.from - 2_000 && e.t <= w.to + 2_000)?.kind;
      criKinds[why ?? 'unexplained'] = (criKinds[why ?? 'unexplained'] ?? 0) + 1;
      R.check('shim-errors', what, why ? undefined : `RunPodSandbox failed: ${d}`);
    }
    R.check('shim-errors', what);
    R.invariant('shim-errors', what).evidence = {
      errorLines: kinds,
      runPodSandboxFailures: criKinds,
      injectedDelegateFaults: faults.size,
      killedAdds: killedAdds.size,
      logLines: lines.length,
    };
  }

  /** A kubelet timeout's effect: SIGKILL to the first shim found running ADD, while a pod is being created. */
  async function killShimMidAdd(): Promise<void> {
    const w = openWindow('shim killed mid-ADD');
    const shim = path.join(node.bed.binDir, 'ipam-shim');
    let killed: { pid: number; id: string } | undefined;
    const hunt = (async () => {
      const end = Date.now() + 20_000;
      while (!killed && Date.now() < end) {
        for (const e of await readdir('/proc')) {
          if (!/^\d+$/.test(e)) continue;
          try {
            if ((await readFile(`/proc/${e}/cmdline`, 'utf8')).split('\0')[0] !== shim) continue;
            const env = (await readFile(`/proc/${e}/environ`, 'utf8')).split('\0');
            if (!env.includes('CNI_COMMAND=ADD')) continue;
            process.kill(Number(e), 'SIGKILL');
            killed = { pid: Number(e), id: env.find((v) => v.startsWith('CNI_CONTAINERID='))?.slice(16) ?? '' };
            break;
          } catch {
            // gone
          }
        }
        await sleep(2);
      }
    })();
    const p = createPod();
    await hunt;
    await p;
    if (killed) {
      killedAdds.add(killed.id);
      R.count('shimsKilledMidAdd');
      R.event('fault', `killed shim pid ${killed.pid} in ADD of ${killed.id.slice(0, 12)}`);
    } else R.event('fault', 'no shim ADD found to kill');
    w();
  }

  async function waitInstalled(build: string): Promise<void> {
    const want = await sha256(build);
    const end = Date.now() + 60_000;
    while (Date.now() < end) {
      if ((await sha256(path.join(node.bed.binDir, 'ipam-shim')).catch(() => '')) === want) return;
      await sleep(200);
    }
    throw new Error(`the agent did not install ${build} within 60 s\n${await node.agentLogs()}`);
  }
}

async function sha256(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest('hex');
}

async function sleepUntil(t: number): Promise<void> {
  const ms = t - Date.now();
  if (ms > 0) await sleep(ms);
}
