// Global setup for the namespace suites: the host's own nftables ruleset, bridge nat table and neighbour
// entries must be exactly as they were when the suites end. Every test works in namespaces it made; this is
// the proof that none of them (or the plugin under test) touched what is not theirs.
import { execa } from 'execa';

async function snapshot(): Promise<string> {
  const parts = await Promise.all([
    execa('nft', ['list', 'ruleset'], { reject: false }).then((r) => `nft:\n${r.stdout}`),
    execa('ebtables', ['-t', 'nat', '-L'], { reject: false }).then((r) => `ebtables nat:\n${r.stdout}`),
    execa('ip', ['neigh', 'show', 'nud', 'permanent'], { reject: false }).then((r) => `permanent neighbours:\n${r.stdout}`),
  ]);
  return parts.join('\n');
}

export default async function setup(): Promise<() => Promise<void>> {
  if (process.getuid?.() !== 0) return async () => undefined;
  const before = await snapshot();
  return async () => {
    const after = await snapshot();
    if (after !== before) {
      throw new Error(`the test suites changed the host's network state:\n--- before\n${before}\n--- after\n${after}`);
    }
  };
}
