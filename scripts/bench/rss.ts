// 6. Peak RSS of one invocation.
import { type Case, alternate, fmtMiB, heading, rssRun, stats, table } from '../bench-lib.js';
import {
  FLOOR_ENV,
  HOST_LOCAL,
  type Json,
  NODE,
  NS,
  RUNS,
  VARIANTS,
  VERSION_ENV,
  VERSION_IN,
  cni,
  cniEnv,
  hlConf,
  nextCid,
  results,
  shimArgv,
  slotConf,
} from './context.js';

export async function sectionRss(): Promise<void> {
  heading(`Peak RSS of one invocation (ru_maxrss, ${RUNS} runs, alternating)`);
  const rssCase = (name: string, argv: string[], env: NodeJS.ProcessEnv, input: string): Case => ({
    name,
    run: async () => {
      const r = await rssRun(argv, { env, input });
      if (r.code !== 0) throw new Error(`${name}: exit ${r.code}: ${r.stdout.slice(0, 500)}`);
      return { ms: r.ms, rssKiB: r.maxRssKiB };
    },
  });
  const addCase = (name: string, argv: string[], conf: Json): Case => ({
    name,
    run: async () => {
      const e = { containerID: nextCid('rss'), netns: `/run/netns/${NS}-none`, ifname: 'eth0' };
      const r = await rssRun(argv, { env: cniEnv('ADD', e), input: JSON.stringify(conf) });
      if (r.code !== 0) throw new Error(`${name}: exit ${r.code}: ${r.stdout.slice(0, 500)}`);
      await cni(argv, { ...conf, prevResult: JSON.parse(r.stdout) }, cniEnv('DEL', e));
      return { ms: r.ms, rssKiB: r.maxRssKiB };
    },
  });
  const cases: Case[] = [
    rssCase('node -e 0', [NODE, '-e', '0'], FLOOR_ENV, ''),
    rssCase('host-local VERSION', HOST_LOCAL(), VERSION_ENV, VERSION_IN),
  ];
  cases.push(addCase('host-local ADD dual', HOST_LOCAL(), hlConf('rss', 'dual')));
  for (const v of VARIANTS) {
    cases.push(rssCase(`${v.name} SEA VERSION`, shimArgv(v, 'sea'), VERSION_ENV, VERSION_IN));
    cases.push(rssCase(`${v.name} node ipam-shim.js VERSION`, shimArgv(v, 'js'), VERSION_ENV, VERSION_IN));
    cases.push(addCase(`${v.name} SEA ADD dual`, shimArgv(v, 'sea'), slotConf(v, 'rss', 'dual')));
    cases.push(addCase(`${v.name} node ipam-shim.js ADD dual`, shimArgv(v, 'js'), slotConf(v, 'rss', 'dual')));
  }
  const samples = await alternate(cases, { runs: RUNS, warmup: 1 });
  const rows: string[][] = [['case', 'median MiB', 'min', 'max', 'under 60 MiB']];
  for (const c of cases) {
    const s = stats(samples.get(c.name)!.rss);
    rows.push([c.name, fmtMiB(s.median), fmtMiB(s.min), fmtMiB(s.max), s.max < 60 * 1024 ? 'yes' : 'NO']);
  }
  console.log(table(rows));
  results.rss = Object.fromEntries([...samples].map(([k, x]) => [k, stats(x.rss)]));
}
