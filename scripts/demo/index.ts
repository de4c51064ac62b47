// The demo: the real plugin through real ADD/CHECK/GC/STATUS/DEL in network namespaces, one section per
// failure ipam-shim exists for. `npm run demo` (after install-deps and build) or scripts/demo.sh.
import { createDemo, type DemoSection } from './section.js';

const SECTIONS: Array<() => Promise<DemoSection>> = [
  async () => (await import('./basics.js')).section,
  async () => (await import('./residue.js')).section,
  async () => (await import('./agent-gc.js')).section,
  async () => (await import('./reserved.js')).section,
  async () => (await import('./probe.js')).section,
  async () => (await import('./cri.js')).section,
];

const d = createDemo();
const only = process.argv[2];
for (const load of SECTIONS) {
  const section = await load();
  if (only && section.name !== only) continue;
  try {
    await section.run(d);
  } catch (e) {
    d.verdict(false, `section ${section.name} crashed: ${(e as Error).stack ?? e}`);
  }
}
process.stdout.write(`\n${d.failures ? `${d.failures} demo step(s) did not go as expected` : 'every step behaved as described'}\n`);
process.exit(d.failures ? 1 : 0);
