// 5c. `ipam-shim plan` on large inputs.
import { type Samples, alternate, fmtMiB, fmtMs, heading, rssRun, sampleOf, stats, table } from '../bench-lib.js';
import { type Json, SCALE_RUNS, SIZES, VARIANTS, cell, med, results } from './context.js';
import { ipOf, slopes } from './scale.js';

export async function sectionPlan(): Promise<void> {
  heading(`ipam-shim plan with N reserved CIDRs (SEA, ${SCALE_RUNS} runs per size)`);
  const v = VARIANTS[0]!;
  const out: Json = {};
  const raw: Array<{ N: number; s: Samples }> = [];
  for (const N of SIZES) {
    const cidrs = Array.from({ length: N }, (_, i) => `${ipOf((10 << 24) + 256 * 7, i * 256)}/28`);
    const args: string[] = ['plan', '--pool', '10.0.0.0/8', '--node-mask', '24'];
    for (let i = 0; i < cidrs.length; i += 1000) args.push('--reserved', cidrs.slice(i, i + 1000).join(','));
    args.push('--json');
    const samples = await alternate(
      [
        {
          name: 'plan',
          run: async () => {
            const r = await rssRun([v.sea, ...args]);
            if (r.code !== 0 && r.code !== 1) throw new Error(`plan ${N}: exit ${r.code}: ${r.stderr.slice(0, 1000)}`);
            return sampleOf(r);
          },
        },
      ],
      { runs: SCALE_RUNS, warmup: 1 },
    );
    raw.push({ N, s: samples.get('plan')! });
  }
  const sw = slopes(raw.map((r) => [r.N, med(r.s.ms)]));
  const sc = slopes(raw.map((r) => [r.N, med(r.s.cpu)]));
  const rows: string[][] = [['reserved CIDRs', 'wall median (min–max) ms', 'CPU', 'peak RSS MiB', 'marginal ms per 1k (wall)', 'per 1k (CPU)']];
  raw.forEach((r, i) => {
    rows.push([
      String(r.N),
      cell(r.s.ms),
      fmtMs(med(r.s.cpu)),
      r.s.rss.length ? `${fmtMiB(med(r.s.rss))} (max ${fmtMiB(Math.max(...r.s.rss))})` : '–',
      sw.perK[i]!,
      sc.perK[i]!,
    ]);
    out[r.N] = { plan: stats(r.s.ms), cpu: stats(r.s.cpu), rssKiB: stats(r.s.rss) };
  });
  console.log(table(rows));
  results.plan = out;
  results.planLinear = { wall: sw, cpu: sc };
}
