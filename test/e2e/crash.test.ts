// SIGKILL the BUILT shim at chosen moments of an ADD in the IPAM slot (the way kubelet's timeout kills a
// plugin), over the real host-local behind test/fixtures/bin/wrap-ipam, whose sleeps widen the windows around
// the delegate call. The moments are found from outside: wrap-ipam's marker files (delegate started / returned)
// and inotify on the ledger's records directory (a temp file appearing = a ledger write in progress).
// Afterwards every ledger record parses, and one GC — the CNI GC verb, or `ipam-shim gc --apply` over the
// runtime's result cache — leaves exactly the completed attachments allocated: nothing leaked, nothing live
// released (including attachments the runtime forgot whose sandbox still holds the address).
//
//   IPAM_SHIM_CRASH_N  kills per campaign (default 30; the full run is 100)
import { execa, type ResultPromise } from 'execa';
import { existsSync, watch, type FSWatcher } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FIXTURE_BIN, invoke, SHIM } from '../support/shim/cni.js';
import { hostLocal, shimKeys } from '../support/shim/conf.js';
import { inNs, rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { disagreements, envInt, hostLocalStore, pidsIn, pool, readLedger, waitGone, WRAP_IPAM } from '../support/shim/robust.js';

const haveRoot = rootOrSkip();
const RUNS = envInt('IPAM_SHIM_CRASH_N', 30);

/** Where each run is killed, round robin; 'none' twice so enough attachments complete to prove GC keeps them. */
const PHASES = ['early', 'delegate-pre', 'ledger-intent', 'none', 'delegate-post', 'ledger-attached', 'late', 'none'] as const;
type Phase = (typeof PHASES)[number];

const { s, net } = useScratchNet();
// Registered after the fixture's hooks, so it runs before them (vitest runs after-hooks in reverse): no killed
// run's process may outlive its namespace or directory.
afterEach(async () => {
  for (const pid of await pidsIn(join(s.dir, 'pids'))) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});

interface Campaign {
  network: string;
  ipam: Record<string, unknown>;
  cniVersion: string;
  nsPrefix: string;
}

interface Run {
  cid: string;
  phase: Phase;
  killed: boolean;
  ips: string[];
  netnsName: string;
}

const rand = (max: number) => Math.random() * max;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function campaign(cniVersion: string): Campaign {
  const network = `crash-${uid()}`;
  return {
    network,
    cniVersion,
    nsPrefix: `cr${uid(4)}`,
    ipam: shimKeys({
      dirs: s,
      probeRewrite: false,
      delegate: { ...hostLocal(s.dataDir, '10.237.0.0/24'), type: WRAP_IPAM },
      keys: { delegateTimeoutMs: 10_000 },
    }),
  };
}

const confOf = (c: Campaign) => ({ cniVersion: c.cniVersion, name: c.network, type: 'ptp', ipam: c.ipam });

/** Watches the records directory; resolves waiters when a temp file for their attachment is created. */
class LedgerWriteWatch {
  private readonly watcher: FSWatcher;
  private waiters: Array<{ cid: string; after: () => boolean; resolve: () => void }> = [];
  constructor(dir: string) {
    this.watcher = watch(dir, (_event, name) => {
      if (!name?.endsWith('.tmp')) return;
      for (const w of [...this.waiters]) {
        if (name.startsWith(`.${w.cid}:`) && w.after()) {
          this.waiters = this.waiters.filter((x) => x !== w);
          w.resolve();
        }
      }
    });
  }
  next(cid: string, after: () => boolean = () => true): Promise<void> {
    return new Promise((resolve) => this.waiters.push({ cid, after, resolve }));
  }
  close(): void {
    this.watcher.close();
  }
}

async function until(pred: () => boolean, timeoutMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) return false;
    await sleep(2);
  }
  return true;
}

/** Runs RUNS ADDs, each killed in its phase (or not), 3 at a time. */
async function crashAdds(c: Campaign): Promise<Run[]> {
  const recordsDir = join(s.stateDir, c.network, 'records');
  await mkdir(recordsDir, { recursive: true, mode: 0o700 });
  await mkdir(join(s.dir, 'marks'));
  const writes = new LedgerWriteWatch(recordsDir);
  try {
    return await pool(
      Array.from({ length: RUNS }, (_, i) => i),
      3,
      async (i): Promise<Run> => {
        const cid = `crash-${i}`;
        const phase = PHASES[i % PHASES.length]!;
        const netnsName = `${c.nsPrefix}-${i}`;
        const mark = join(s.dir, 'marks', cid);
        const pre = rand(0.15);
        const post = rand(0.15);
        const sub: ResultPromise = execa(SHIM, [], {
          input: JSON.stringify(confOf(c)),
          env: {
            PATH: process.env.PATH!,
            CNI_COMMAND: 'ADD',
            CNI_CONTAINERID: cid,
            CNI_NETNS: `/run/netns/${netnsName}`,
            CNI_IFNAME: 'eth0',
            CNI_ARGS: '',
            CNI_PATH: FIXTURE_BIN,
            WRAP_IPAM_PRE: pre.toFixed(3),
            WRAP_IPAM_POST: post.toFixed(3),
            WRAP_IPAM_MARK: mark,
            WRAP_IPAM_PIDFILE: join(s.dir, 'pids'),
          },
          extendEnv: false,
          reject: false,
          timeout: 60_000,
        });
        let exited = false;
        const done = sub.then((r) => {
          exited = true;
          return r;
        });
        const kill = () => {
          if (!exited) sub.kill('SIGKILL');
        };
        const trigger = (async () => {
          switch (phase) {
            case 'early':
              return sleep(rand(250)).then(kill);
            case 'delegate-pre':
              return until(() => exited || existsSync(`${mark}.pre`))
                .then(() => sleep(rand(pre * 1000)))
                .then(kill);
            case 'ledger-intent':
              return Promise.race([writes.next(cid), done]).then(kill);
            case 'delegate-post':
              return until(() => exited || existsSync(`${mark}.post`))
                .then(() => sleep(rand(post * 1000)))
                .then(kill);
            case 'ledger-attached':
              return Promise.race([writes.next(cid, () => existsSync(`${mark}.post`)), done]).then(kill);
            case 'late':
              return until(() => exited || existsSync(`${mark}.post`))
                .then(() => sleep(post * 1000 + rand(150)))
                .then(kill);
            case 'none':
              return undefined;
          }
        })();
        const r = await done;
        await trigger;
        const killed = r.signal === 'SIGKILL';
        if (!killed) expect(r.exitCode, `${cid} (${phase}) failed on its own: ${String(r.stdout)}${String(r.stderr)}`).toBe(0);
        const ips = killed ? [] : (JSON.parse(String(r.stdout)).ips as Array<{ address: string }>).map((ip) => ip.address.split('/')[0]!);
        return { cid, phase, killed, ips, netnsName };
      },
    );
  } finally {
    writes.close();
  }
}

/**
 * After the kills, like a node after kubelet's timeouts: killed sandboxes are gone; every fourth completed
 * attachment is "forgotten" by the runtime (left out of the valid list) while its sandbox still holds the address.
 */
async function settle(runs: Run[]): Promise<{ completed: Run[]; forgotten: Run[]; valid: Run[] }> {
  // Orphaned delegates (their shim was killed) finish on their own: wait for them before judging the store.
  expect(await waitGone(await pidsIn(join(s.dir, 'pids')), 15_000)).toEqual([]);
  const completed = runs.filter((r) => !r.killed);
  const forgotten = completed.filter((_, i) => i % 4 === 1);
  for (const r of forgotten) {
    await execa('ip', ['netns', 'add', r.netnsName]);
    net.defer(() => execa('ip', ['netns', 'del', r.netnsName], { reject: false }));
    await inNs(r.netnsName, 'ip', ['addr', 'add', `${r.ips[0]}/32`, 'dev', 'lo']);
  }
  const tally = Object.fromEntries(
    [...new Set(PHASES)].map((p) => [
      p,
      `${runs.filter((r) => r.phase === p && r.killed).length}/${runs.filter((r) => r.phase === p).length} killed`,
    ]),
  );
  console.log(
    `crash campaign: ${runs.length} ADDs, ${runs.length - completed.length} killed, ${completed.length} completed (${forgotten.length} forgotten but alive)`,
    tally,
  );
  return { completed, forgotten, valid: completed.filter((r) => !forgotten.includes(r)) };
}

async function expectOnlyCompletedRemain(c: Campaign, completed: Run[]): Promise<void> {
  const ledger = await readLedger(s.stateDir, c.network);
  const store = await hostLocalStore(s.dataDir, c.network);
  // Temp files of writes cut short by SIGKILL may stay (they are never read); everything else must agree.
  expect(disagreements({ ...ledger, temps: [] }, store)).toEqual([]);
  expect([...ledger.records.keys()].sort()).toEqual(completed.map((r) => `${r.cid}:eth0`).sort());
  expect(new Map([...store].sort())).toEqual(new Map(completed.map((r) => [r.ips[0]!, `${r.cid}:eth0`] as [string, string]).sort()));
}

describe.skipIf(!haveRoot)(`SIGKILL during ADD (${RUNS} times)`, () => {
  it('the ledger parses afterwards; one GC verb call releases every leak and nothing live', async () => {
    const c = campaign('1.1.0');
    const runs = await crashAdds(c);
    const { completed, forgotten, valid } = await settle(runs);
    expect(runs.some((r) => r.killed)).toBe(true);

    const before = await readLedger(s.stateDir, c.network);
    expect([...before.corrupt]).toEqual([]);
    // Something did leak: host-local holds addresses of killed ADDs (the delegate finished after its shim died).
    const leakedBefore = [...(await hostLocalStore(s.dataDir, c.network)).values()].filter((k) => !completed.some((r) => `${r.cid}:eth0` === k));
    console.log(`before GC: ${leakedBefore.length} leaked allocation(s), ${before.records.size} record(s), ${before.temps.length} temp file(s)`);

    const gc = await invoke(
      { ...confOf(c), 'cni.dev/valid-attachments': valid.map((r) => ({ containerID: r.cid, ifname: 'eth0' })) },
      { command: 'GC', path: [FIXTURE_BIN] },
    );
    expect(gc.exitCode, gc.stdout).toBe(0);
    await expectOnlyCompletedRemain(c, completed);
    expect(forgotten.every((r) => r.ips.length === 1)).toBe(true);
  });

  it('`ipam-shim gc --apply` over the runtime result cache does the same for a 0.3.1 conflist', async () => {
    const c = campaign('0.3.1');
    const runs = await crashAdds(c);
    const { completed, valid } = await settle(runs);
    expect([...(await readLedger(s.stateDir, c.network)).corrupt]).toEqual([]);

    // The runtime's cache (libcni's cniCacheV1) holds what it believes is attached: the completed, unforgotten ADDs.
    const cacheDir = join(s.dir, 'cache');
    await mkdir(join(cacheDir, 'results'), { recursive: true, mode: 0o700 });
    for (const r of valid) {
      await writeFile(
        join(cacheDir, 'results', `${c.network}-${r.cid}-eth0`),
        JSON.stringify({
          kind: 'cniCacheV1',
          containerId: r.cid,
          ifName: 'eth0',
          networkName: c.network,
          netns: `/run/netns/${r.netnsName}`,
          config: '',
          result: {},
        }),
        { mode: 0o600 },
      );
    }
    const conflist = join(s.dir, 'net.d', `10-${c.network}.conflist`);
    await mkdir(join(s.dir, 'net.d'));
    await writeFile(conflist, JSON.stringify({ cniVersion: c.cniVersion, name: c.network, plugins: [{ type: 'ptp', ipam: c.ipam }] }));
    const cli = (apply: boolean) =>
      execa(
        SHIM,
        [
          'gc',
          '--conflist',
          conflist,
          '--cache-dir',
          cacheDir,
          '--cni-path',
          FIXTURE_BIN,
          '--grace-seconds',
          '0',
          '--json',
          ...(apply ? ['--apply'] : []),
        ],
        {
          reject: false,
          env: { PATH: process.env.PATH! },
          extendEnv: false,
        },
      );
    const dry = await cli(false);
    expect(dry.exitCode, dry.stderr).toBe(runs.some((r) => r.killed) ? 1 : 0); // dry run: non-zero when something would be released
    const applied = await cli(true);
    expect(applied.exitCode, `${applied.stdout}${applied.stderr}`).toBe(0);
    await expectOnlyCompletedRemain(c, completed);
  });
});
