// 5b. Residue cleanup with N ebtables rules on the node (the scratch netns's nat table).
import { type Case, type Samples, alternate, fmtMiB, fmtMs, heading, mustRun, rssRun, sampleOf, stats, table, timeRun } from '../bench-lib.js';
import { type Json, NS, SCALE_RUNS, SIZES, VARIANTS, cell, cni, cniEnv, med, nextCid, results, shimArgv } from './context.js';
import { ipOf, slopes } from './scale.js';

export async function sectionResidue(): Promise<void> {
  heading(`Residue cleanup with N azure-vnet-style ebtables rules (chained ADD that removes 2 of them; ${SCALE_RUNS} runs per size)`);
  const v = VARIANTS[0]!;
  const out: Json = {};
  const raw: Array<{ N: number; add: Samples; list: Samples }> = [];
  const ruleFor = (i: number) => {
    const ip = ipOf((10 << 24) + (241 << 16) + 2, i);
    const mac = `00:0d:3a:${((i >> 16) & 255).toString(16).padStart(2, '0')}:${((i >> 8) & 255).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`;
    return {
      ip,
      rules: [
        ['-p', 'ARP', '--arp-op', 'Request', '--arp-ip-dst', ip, '-j', 'arpreply', '--arpreply-mac', mac],
        ['-p', 'IPv4', '-i', 'eth0', '--ip-dst', ip, '-j', 'dnat', '--to-dst', mac, '--dnat-target', 'ACCEPT'],
      ],
    };
  };
  const sconf: Json = { cniVersion: '1.0.0', name: 'residue', type: 'ipam-shim', stateDir: v.stateDir, logFile: v.logFile, ipv6ProbeRewrite: 'off' };
  try {
    for (const N of [0, ...SIZES]) {
      const pods = Math.max(1, N / 2);
      const target = ruleFor(Math.floor(pods / 2));
      await mustRun(['ebtables', '-t', 'nat', '-F']);
      if (N > 0) {
        const lines = ['*nat', ':PREROUTING ACCEPT', ':OUTPUT ACCEPT', ':POSTROUTING ACCEPT'];
        for (let i = 0; i < pods; i++) for (const r of ruleFor(i).rules) lines.push(`-A PREROUTING ${r.join(' ')}`);
        lines.push('COMMIT', '');
        await mustRun(['ebtables-restore'], { input: lines.join('\n'), timeoutMs: 600_000 });
      }
      const prevResult = {
        cniVersion: '1.0.0',
        interfaces: [{ name: 'veth-bench' }, { name: 'eth0', sandbox: `/run/netns/${NS}-none` }],
        ips: [{ address: `${target.ip}/16`, interface: 1 }],
      };
      const cases: Case[] = [
        {
          name: 'add',
          run: async () => {
            const e = { containerID: nextCid('residue'), netns: `/run/netns/${NS}-none`, ifname: 'eth0' };
            const r = await rssRun([v.sea], { input: JSON.stringify({ ...sconf, prevResult }), env: cniEnv('ADD', e) });
            if (r.code !== 0) throw new Error(`residue ADD (${N} rules): exit ${r.code}: ${r.stdout.slice(0, 1000)}`);
            await cni(shimArgv(v), { ...sconf, prevResult }, cniEnv('DEL', e));
            return sampleOf(r);
          },
          after: async () => {
            if (N === 0) return;
            // The shim removed the target's two rules; put them back (at the end of the chain) for the next run.
            const listed = (await mustRun(['ebtables', '-t', 'nat', '-L', 'PREROUTING'])).stdout;
            if (listed.includes(`--arp-ip-dst ${target.ip} `)) throw new Error(`residue for ${target.ip} was not removed`);
            for (const r of target.rules) await mustRun(['ebtables', '-t', 'nat', '-A', 'PREROUTING', ...r]);
          },
        },
        { name: 'list', run: async () => sampleOf(await mustRun(['ebtables', '-t', 'nat', '-L', 'PREROUTING'])) },
      ];
      const samples = await alternate(cases, { runs: SCALE_RUNS, warmup: 1 });
      raw.push({ N, add: samples.get('add')!, list: samples.get('list')! });
      process.stderr.write(`  residue ${N}: ${fmtMs(med(samples.get('add')!.ms))} ms\n`);
    }
  } finally {
    await timeRun(['ebtables', '-t', 'nat', '-F']);
  }
  const rows: string[][] = [
    [
      'rules',
      'shim ADD wall median (min–max) ms',
      'CPU',
      'ebtables -L alone (wall)',
      'CPU',
      'peak RSS MiB',
      'marginal ms per 1k rules (wall)',
      'per 1k (CPU)',
    ],
  ];
  const sized = raw.filter((r) => r.N > 0);
  const sw = slopes(sized.map((r) => [r.N, med(r.add.ms)]));
  const sc = slopes(sized.map((r) => [r.N, med(r.add.cpu)]));
  for (const r of raw) {
    const i = sized.indexOf(r);
    rows.push([
      String(r.N),
      cell(r.add.ms),
      fmtMs(med(r.add.cpu)),
      fmtMs(med(r.list.ms)),
      fmtMs(med(r.list.cpu)),
      r.add.rss.length ? `${fmtMiB(med(r.add.rss))} (max ${fmtMiB(Math.max(...r.add.rss))})` : '–',
      i >= 0 ? sw.perK[i]! : '',
      i >= 0 ? sc.perK[i]! : '',
    ]);
    out[r.N] = { add: stats(r.add.ms), addCpu: stats(r.add.cpu), list: stats(r.list.ms), rssKiB: stats(r.add.rss) };
  }
  console.log(table(rows));
  console.log('\nEach run: a chained ADD for one pod IP whose arpreply + dnat rules sit among N rules; the shim lists once and');
  console.log('deletes the two (ebtables -D); "ebtables -L alone" is the listing tool by itself, measured in the same rounds.');
  results.residue = out;
  results.residueLinear = { wall: sw, cpu: sc };
}
