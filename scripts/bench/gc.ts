// 5a. GC at scale: N ledger attachments, N valid attachments, N/50 of the ledger dead (released by DEL).
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Case, type Samples, alternate, fmtMiB, fmtMs, heading, rssRun, sampleOf, stats, table, timeRun } from '../bench-lib.js';
import {
  HOST_LOCAL,
  type Json,
  NS,
  PLUGINS,
  SCALE_RUNS,
  SIZES,
  VARIANTS,
  WORK,
  cell,
  cni,
  cniEnv,
  hlConf,
  med,
  nextCid,
  ratio,
  results,
  shimArgv,
  slotConf,
} from './context.js';
import { slotPair } from './pairs.js';
import { GC_BASE, ipOf, slopes } from './scale.js';

export async function sectionGc(): Promise<void> {
  heading(`GC at scale through the built plugin (SEA), delegate host-local (${SCALE_RUNS} runs per size, alternating with the floors)`);
  const v = VARIANTS[0]!;
  const gcState = join(WORK, 'gc', 'state');
  const gcData = join(WORK, 'gc', 'host-local');
  const gone = join(WORK, 'gc', 'gone');
  const out: Json = {};
  const raw: Array<{ N: number; dels: number; gc: Samples; add: Samples; del: Samples }> = [];
  const failed: string[] = [];
  for (const N of SIZES) {
    const net = `gc${N}`;
    const dir = join(gcState, net);
    const recDir = join(dir, 'records');
    const ipsDir = join(dir, 'ips');
    const hlDir = join(gcData, net);
    for (const d of [gcState, dir, recDir, ipsDir]) mkdirSync(d, { recursive: true, mode: 0o700 });
    mkdirSync(hlDir, { recursive: true });
    const old = new Date(Date.now() - 86_400_000).toISOString();
    const dead: number[] = [];
    const valid: Json[] = [];
    const writeRecord = (i: number, isDead: boolean) => {
      const cid = `pod-${i}`;
      const ip = ipOf(GC_BASE, i);
      const rec = {
        v: 1,
        containerID: cid,
        ifname: 'eth0',
        network: net,
        owner: 'pod',
        state: 'attached',
        placement: 'chained',
        ips: [ip],
        netns: isDead ? join(gone, `ns-${i}`) : `/run/netns/${NS}-pod-${i}`,
        createdAt: old,
        updatedAt: old,
      };
      writeFileSync(join(recDir, `${cid}:eth0.json`), `${JSON.stringify(rec)}\n`, { mode: 0o600 });
      writeFileSync(join(ipsDir, ip), `${cid}:eth0`, { mode: 0o600 });
      if (isDead) writeFileSync(join(hlDir, ip), `${cid}\r\neth0`);
    };
    for (let i = 0; i < N; i++) {
      const isDead = i % 50 === 25;
      writeRecord(i, isDead);
      if (isDead) dead.push(i);
      else valid.push({ containerID: `pod-${i}`, ifname: 'eth0' });
    }
    // The valid list also names attachments the ledger never saw (pods from before the shim): N in total.
    for (let j = 0; valid.length < N; j++) valid.push({ containerID: `elsewhere-${j}`, ifname: 'eth0' });
    const conf: Json = {
      cniVersion: '1.1.0',
      name: net,
      type: 'ipam-shim',
      stateDir: gcState,
      logFile: join(WORK, 'gc', 'shim.log'),
      delegate: { type: 'host-local', dataDir: gcData, ranges: [[{ subnet: '10.128.0.0/9' }]] },
      'cni.dev/valid-attachments': valid,
      'cni.dev/attachments': valid,
    };
    const input = JSON.stringify(conf);
    // The floors, alternating with GC: one shim ADD (IPAM slot) and one host-local DEL of a real allocation.
    const addPair = slotPair('add', shimArgv(v), slotConf(v, 'gcfloor', 'v4'), 'gcfloor');
    const delConf = hlConf('gcfloor', 'v4', join(WORK, 'gc', 'floor-hl'));
    const cases: Case[] = [
      {
        name: 'gc',
        run: async () => {
          const r = await rssRun([v.sea], { input, env: cniEnv('GC', { path: [PLUGINS] }) });
          if (r.code !== 0) throw new Error(`GC ${N}: exit ${r.code}: ${r.stdout.slice(0, 1000)} ${r.stderr.slice(0, 1000)}`);
          return sampleOf(r);
        },
        after: async () => {
          const left = (await timeRun(['ls', hlDir])).stdout.split('\n').filter((f) => /^\d/.test(f));
          if (left.length) throw new Error(`GC ${N} left ${left.length} host-local allocations that should have been released`);
          for (const i of dead) writeRecord(i, true); // restore what GC released, for the next run
        },
      },
      {
        name: 'add',
        run: async (i) => {
          const r = await addPair.add(i);
          await addPair.del!(i, r.state);
          return r.s;
        },
      },
      {
        name: 'del',
        run: async () => {
          const e = { containerID: nextCid('gcdel'), netns: `/run/netns/${NS}-none`, ifname: 'eth0' };
          const a = await cni(HOST_LOCAL(), delConf, cniEnv('ADD', e));
          return cni(HOST_LOCAL(), { ...delConf, prevResult: a.json }, cniEnv('DEL', e));
        },
      },
    ];
    try {
      const samples = await alternate(cases, { runs: SCALE_RUNS, warmup: 1 });
      raw.push({ N, dels: dead.length, gc: samples.get('gc')!, add: samples.get('add')!, del: samples.get('del')! });
      process.stderr.write(`  gc ${N}: ${fmtMs(med(samples.get('gc')!.ms))} ms\n`);
    } catch (e) {
      // A size that fails is a finding, not a reason to lose the others.
      failed.push(`${N}: ${(e as Error).message.slice(0, 300)}`);
    }
    rmSync(join(WORK, 'gc'), { recursive: true, force: true });
  }
  const rows: string[][] = [
    [
      'attachments',
      'DELs run',
      'GC wall median (min–max) ms',
      'CPU',
      'peak RSS MiB',
      'floor: ADD + DELs (wall)',
      'GC ÷ floor',
      'CPU ÷ floor CPU',
      'marginal ms per 1k (wall)',
      'per 1k (CPU)',
    ],
  ];
  const sw = slopes(raw.map((r) => [r.N, med(r.gc.ms)]));
  const sc = slopes(raw.map((r) => [r.N, med(r.gc.cpu)]));
  raw.forEach((r, i) => {
    const floorW = med(r.add.ms) + r.dels * med(r.del.ms);
    const floorC = med(r.add.cpu) + r.dels * med(r.del.cpu);
    rows.push([
      String(r.N),
      String(r.dels),
      cell(r.gc.ms),
      fmtMs(med(r.gc.cpu)),
      r.gc.rss.length ? `${fmtMiB(med(r.gc.rss))} (max ${fmtMiB(Math.max(...r.gc.rss))})` : '–',
      `${fmtMs(med(r.add.ms))} + ${r.dels}×${fmtMs(med(r.del.ms))} = ${fmtMs(floorW)}`,
      ratio(med(r.gc.ms), floorW),
      ratio(med(r.gc.cpu), floorC),
      sw.perK[i]!,
      sc.perK[i]!,
    ]);
    out[r.N] = {
      gc: stats(r.gc.ms),
      gcCpu: stats(r.gc.cpu),
      rssKiB: stats(r.gc.rss),
      add: stats(r.add.ms),
      del: stats(r.del.ms),
      dels: r.dels,
      floor: floorW,
      ratio: med(r.gc.ms) / floorW,
      ratioCpu: med(r.gc.cpu) / floorC,
    };
  });
  console.log(table(rows));
  console.log('\nLedger: N records, N/50 of them dead (netns gone) and released with a host-local DEL each; valid list: N entries.');
  console.log(
    'floor = one shim ADD + the delegate DELs GC must run, each measured in the same rounds. Linear = the marginal cost per 1k stays flat.',
  );
  for (const f of failed) console.log(`FAILED at ${f}`);
  results.gc = out;
  results.gcLinear = { wall: sw, cpu: sc };
}
