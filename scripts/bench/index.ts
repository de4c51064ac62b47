// `npm run bench [-- flags]`: the shim against its floors (node -e 0, the Go reference plugins) and against the
// plugins it sits beside. Prints tables; never asserts. Every figure is a median over --runs runs with min/max,
// and everything compared in one table was measured in the same run, alternating (see scripts/bench-lib.ts).
//
//   --only a,b        sections: version,status,add,split,concurrency,gc,residue,plan,rss,cri,agent (default: all), and the
//                     opt-in plan-inprocess, residue-add, probe-add (each also runs alone: npx tsx scripts/bench/<name>.ts)
//   --runs N          runs per figure (default 20); --scale-runs N for concurrency/gc/residue/plan (default --runs)
//   --sizes a,b,c     scale sizes for gc, residue and plan (default 1000,5000,20000; CI: --sizes 200,1000)
//   --parallel N      concurrent ADDs in the concurrency section (default 64)
//   --bin DIR         the build to measure (default dist/; copied first, so a rebuild meanwhile cannot interfere)
//   --variant N=PATH  also measure another build side by side (repeatable): a saved pre-change dist/, or its
//                     single executable (e.g. a copy of dist/ipam-shim, its ipam-shim.js beside it)
//   --plugins DIR     reference plugins (default /usr/lib/cni)
//   --plugins11 DIR   reference plugins that speak 1.1.0, for STATUS (default .deps/cni-plugins-1.9)
//   --runtime-env K=V add K=V to the environment every plugin and floor gets (repeatable), e.g.
//                     NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt when a runtime passes it on
//   --metrics         the shim's configs set metricsFile (every call updates the textfile)
//   --json FILE       also write every sample as JSON
//   --keep            keep the scratch directory
//
// Needs root: it runs inside a scratch network namespace (re-executing itself under `ip netns exec`) so that the
// shim's ebtables/neighbour/nft work, ptp's veths and the residue rules never touch the machine's own netns,
// and every state directory lives under a temp dir.
//
// Every process is started through a tiny C runner (scripts/bench-lib.ts) that reports its wall time, its CPU time (user +
// CPU time is the steadier figure; tables show both, and targets are judged on both.
import { rmSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { runnerPath } from '../bench-lib.js';
import { flags, NS, only, results, RUNS, RUNTIME_ENV, SCALE_RUNS, SECTIONS, type Section, SIZES, VARIANTS, WORK } from './context.js';
import { sectionVersion } from './version.js';
import { sectionStatus } from './status.js';
import { sectionAdd } from './add.js';
import { sectionSplit } from './split.js';
import { sectionConcurrency } from './concurrency.js';
import { sectionGc } from './gc.js';
import { sectionResidue } from './residue.js';
import { sectionPlan } from './plan.js';
import { sectionRss } from './rss.js';
import { summary } from './summary.js';

const started = Date.now();
console.log(
  `# ipam-shim bench: ${RUNS} runs (scale ${SCALE_RUNS}), sizes ${SIZES.join('/')}, node ${process.version}, ${cpus().length} CPUs, netns ${NS}`,
);
console.log(
  `# environment of every plugin and floor: PATH, CNI_*${Object.keys(RUNTIME_ENV)
    .map((k) => `, ${k}=${RUNTIME_ENV[k]}`)
    .join('')} (nothing else inherited)`,
);
console.log(
  `# builds: ${VARIANTS.map((v) => `${v.name}`).join(', ')}; CPU/RSS from ${runnerPath() ? 'a wait4() runner' : '/usr/bin/time (no C compiler: no CPU figures)'}`,
);
try {
  // One module per section. A new section adds its name to SECTIONS in context.ts and one line here.
  const run: Record<Section, () => Promise<void>> = {
    version: sectionVersion,
    status: sectionStatus,
    add: sectionAdd,
    split: sectionSplit,
    concurrency: sectionConcurrency,
    gc: sectionGc,
    residue: sectionResidue,
    plan: sectionPlan,
    rss: sectionRss,
    cri: async () => undefined, // run by the parent, after this process (context.ts)
    agent: async () => undefined, // likewise
  };
  for (const s of SECTIONS) if (only.has(s)) await run[s]();
  summary();
  if (flags.json) writeFileSync(flags.json, JSON.stringify(results, null, 2));
  console.log(`\n(${((Date.now() - started) / 1000).toFixed(0)} s)`);
} finally {
  if (!flags.keep) rmSync(WORK, { recursive: true, force: true });
  else console.log(`kept ${WORK}`);
}
