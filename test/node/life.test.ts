// The node-life runner (test/life/life.ts, issue 36) as a test: a short life through every phase (boot, churn with a
// rewrite storm, the shim's upgrade and rollback and faults, reboot, the runtime's start-up GC, re-creation, drain)
// on containerd 2.x, failing on any broken invariant. Its report and JSON go to .tmp/life (LIFE_OUT). CI's
// containerd-2 pass runs it (test/node with CONTAINERD_BIN_DIR); with containerd 1.x (the base pass) it skips:
// 1.x sends no STATUS and Debian 12's plugins 1.1.1 refuse the newer line's 1.1.0 list. cilium-cni's place holds the
// stand-in of LIFE_CILIUM_LINE's Cilium line, 1.17 (AKS's) unless set: not CILIUM_LINE, which CI's containerd-2 pass
// sets to newer for the CRI suites. `npm run life -- --minutes 30 [--cilium-line newer]` runs a long one
// (test/life/run.ts).
import { existsSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { ROOT } from '../../scripts/image/build-image.js';
import { hasContainerd } from '../support/runtimes/cri/bed.js';
import { containerdBinDir, containerdBuild, missingTools } from '../support/runtimes/cri/containerd.js';
import { envInt } from '../support/shim/robust.js';
import { nodeImagePrerequisites } from '../support/deploy/node-image.js';
import { runLife } from '../life/life.js';
import { CILIUM_LINES, type CiliumLine } from '../support/shim/cilium.js';

const bin = containerdBinDir();
const is2x = missingTools(bin).length === 0 && containerdBuild(bin).major >= 2;
const plugins = path.resolve(process.env.CNI_PLUGIN_DIR ?? '/usr/lib/cni');
const speaks11 = existsSync(path.join(plugins, 'host-local')) && !plugins.startsWith('/usr/lib/cni');
if (!is2x || !speaks11)
  console.warn(
    `skipping the node life: it needs containerd 2.x (CONTAINERD_BIN_DIR, now ${bin}) and reference plugins that speak 1.1.0 (CNI_PLUGIN_DIR, now ${plugins}); CI's containerd-2 pass runs it, or npm run life`,
  );
const enabled = is2x && speaks11 && nodeImagePrerequisites('the node life', { 'containerd, runc and busybox-static': hasContainerd(bin) });
const churnSeconds = envInt('LIFE_CHURN_SECONDS', 75);
const ciliumLine = (process.env.LIFE_CILIUM_LINE || '1.17') as CiliumLine;
if (!CILIUM_LINES.includes(ciliumLine)) throw new Error(`LIFE_CILIUM_LINE=${ciliumLine}: not one of ${CILIUM_LINES.join(', ')}`);

it.skipIf(!enabled)(
  `a node life (cilium-cni ${ciliumLine}): every phase, every invariant`,
  async () => {
    const r = await runLife({
      containerdBinDir: bin,
      pluginDir: plugins,
      ciliumLine,
      churnSeconds,
      maxPods: envInt('LIFE_MAX_PODS', 8),
      concurrency: envInt('LIFE_CONCURRENCY', 3),
      outDir: path.resolve(process.env.LIFE_OUT ?? path.join(ROOT, '.tmp/life')),
    });
    console.log(r.text);
    console.log(`node life: report ${r.jsonPath}`);
    expect(r.failed, r.text).toEqual([]);
  },
  (churnSeconds + 600) * 1000,
);
