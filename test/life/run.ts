// `npm run life -- [--minutes N] [--max-pods N] [--concurrency N] [--cilium-line 1.17|newer] [--out DIR]`: the node
// life (test/node/life.test.ts) on containerd 2.x and the reference plugins 1.9 that install-deps publishes, through
// vitest's integration project (its host guard included). --minutes sets the churn's length (the other phases add
// about two minutes); --cilium-line the Cilium line whose cilium-cni stand-in the node runs (default 1.17).
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT } from '../support/shim/cni.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string' },
    'max-pods': { type: 'string' },
    concurrency: { type: 'string' },
    'cilium-line': { type: 'string' },
    out: { type: 'string' },
  },
});
const env: Record<string, string> = {
  ...(process.env as Record<string, string>),
  CONTAINERD_BIN_DIR: process.env.CONTAINERD_BIN_DIR ?? path.join(ROOT, '.deps/containerd-2'),
  CNI_PLUGIN_DIR: process.env.CNI_PLUGIN_DIR ?? path.join(ROOT, '.deps/cni-plugins-1.9'),
};
if (values.minutes) env.LIFE_CHURN_SECONDS = String(Math.round(Number(values.minutes) * 60));
if (values['max-pods']) env.LIFE_MAX_PODS = values['max-pods'];
if (values.concurrency) env.LIFE_CONCURRENCY = values.concurrency;
if (values['cilium-line']) env.LIFE_CILIUM_LINE = values['cilium-line'];
if (values.out) env.LIFE_OUT = path.resolve(values.out);
const r = spawnSync('npx', ['vitest', 'run', '--project', 'integration', 'test/node/life.test.ts'], { cwd: ROOT, env, stdio: 'inherit' });
process.exit(r.status ?? 1);
