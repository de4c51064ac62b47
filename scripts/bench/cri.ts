// npx tsx scripts/bench/cri.ts [--runs N]       (root; build first: npm run build; also `npm run bench`, section cri)
//
// The shim's share of a pod's network set-up on the kubelet path: RunPodSandbox and StopPodSandbox through a
// private containerd 1.6 (CRI → libcni → the conflist), with ptp + host-local alone, with the shim chained after
// ptp (the AKS shape, 0.3.1) and with the shim in the IPAM slot. The three conflists alternate within one run (each
// switch is a conf_dir rename containerd reloads, untimed); RemovePodSandbox follows each sample, untimed.
// containerd runs in a scratch node netns with a node's environment (PATH only: no NODE_EXTRA_CA_CERTS and the
// like, which would slow every Node start-up of the shim). Prints medians with min/max; never asserts.
import { parseArgs } from 'node:util';
import { cpus } from 'node:os';
import { alternate, emptySamples, fmtMs, fmtStats, heading, pushSample, stats, table, type Case, type Samples } from '../bench-lib.js';
import { CRI_SHIM, CriBed } from '../../test/support/runtimes/cri/bed.js';
import { shimConfList, type Placement } from '../../test/support/runtimes/cri/conflists.js';
import { TestNet } from '../../test/support/net/netns.js';

const { values: flags } = parseArgs({ options: { runs: { type: 'string', default: '15' } }, strict: true });
const RUNS = Number(flags.runs);
if (process.getuid?.() !== 0) {
  console.error('bench-cri: needs root (network namespaces, containerd)');
  process.exit(2);
}
if (!(RUNS >= 1)) {
  console.error('usage: npx tsx scripts/bench/cri.ts [--runs N ≥ 1]');
  process.exit(2);
}

type Variant = 'without the shim' | Placement;
const VARIANTS: Variant[] = ['without the shim', 'chained', 'ipam'];
const RANGES = [[{ subnet: '10.102.0.0/16' }]];
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

const net = new TestNet();
let bed: CriBed | undefined;
try {
  const node = await net.netns('benchcri');
  const conf = (v: Variant) =>
    shimConfList(bed!, {
      placement: v === 'without the shim' ? 'chained' : v,
      cniVersion: '0.3.1',
      ranges: RANGES,
      withoutShim: v === 'without the shim',
    });
  bed = await CriBed.create({
    node,
    confList: (dirs) => shimConfList(dirs, { placement: 'chained', cniVersion: '0.3.1', ranges: RANGES, withoutShim: true }),
  });
  const version = await bed.cri.version();
  console.log(
    `# bench-cri: ${RUNS} runs, ${version.runtime_name} ${version.runtime_version} (CRI ${version.runtime_api_version}), shim ${CRI_SHIM}, node ${process.version}, ${cpus().length} CPUs`,
  );

  const stops = new Map<Variant, Samples>(VARIANTS.map((v) => [v, emptySamples()]));
  let current: Variant | undefined;
  const cases: Case[] = VARIANTS.map((v) => {
    let id = '';
    return {
      name: v,
      async run(i) {
        if (current !== v) await bed!.setConfList(conf(v)); // untimed: the reload happens before the call
        current = v;
        const config = bed!.sandboxConfig(`bench-${i}`);
        const t0 = process.hrtime.bigint();
        id = await bed!.cri.runPodSandbox(config);
        return ms(t0);
      },
      async after(i) {
        const t0 = process.hrtime.bigint();
        await bed!.cri.stopPodSandbox(id);
        if (i >= 2) pushSample(stops.get(v)!, ms(t0)); // alternate()'s default warm-up is 2 rounds
        await bed!.cri.removePodSandbox(id);
      },
    };
  });
  const runs = await alternate(cases, { runs: RUNS });

  heading('containerd CRI: pod network set-up with and without the shim (0.3.1 conflist, ptp + host-local)');
  const base = stats(runs.get('without the shim')!.ms).median;
  const baseStop = stats(stops.get('without the shim')!.ms).median;
  const rows = [['conflist', 'RunPodSandbox ms', 'shim adds', 'StopPodSandbox ms', 'shim adds']];
  for (const v of VARIANTS) {
    const run = stats(runs.get(v)!.ms);
    const stop = stats(stops.get(v)!.ms);
    const label =
      v === 'without the shim' ? 'ptp + host-local (no shim)' : v === 'chained' ? 'ptp + host-local, shim chained' : 'ptp, ipam = shim(host-local)';
    rows.push([
      label,
      fmtStats(run),
      v === 'without the shim' ? '–' : `+${fmtMs(run.median - base)}`,
      fmtStats(stop),
      v === 'without the shim' ? '–' : `+${fmtMs(stop.median - baseStop)}`,
    ]);
  }
  console.log(table(rows));
  console.log('\nmedian (min–max) over the runs; StopPodSandbox runs DEL through the whole chain.');
} finally {
  await bed?.cleanup();
  await net.cleanup();
}
