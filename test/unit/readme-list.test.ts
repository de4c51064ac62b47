// The README's chained list is one the Cilium line AKS runs (1.17) takes: the list a reader copies must not fail
// every ADD in cilium-cni. Judged by the rule install and doctor use (src/cni/list-versions.ts) against the real
// cilium-cni 1.17.5's VERSION answer (measured, issue 41); its shape is a shipped 1.17-line list's
// (conflist/README.md). test/e2e/conflists.test.ts runs it through libcni with the 1.17 stand-in.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { judgeListVersions } from '../../src/cni/list-versions.js';
import { ROOT } from '../support/paths.js';

/** cilium-cni 1.17.5's answer to VERSION (issue 41). */
const CILIUM_117 = { type: 'cilium-cni', path: '/opt/cni/bin/cilium-cni', versions: ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0'] };

/** The first ```json block after the README's "**Chained**" paragraph: the list it tells readers to use. */
async function readmeList(): Promise<Record<string, any>> {
  const md = await readFile(join(ROOT, 'README.md'), 'utf8');
  const from = md.indexOf('**Chained**');
  expect(from, 'README has its **Chained** paragraph').toBeGreaterThan(0);
  const block = /```json\n([\s\S]*?)```/.exec(md.slice(from));
  expect(block, 'a ```json block follows it').not.toBeNull();
  return JSON.parse(block![1]!);
}

const typesOf = (l: Record<string, any>) => (l.plugins as Array<{ type: string }>).map((p) => p.type);

describe("the README's chained list", () => {
  it('is taken by cilium-cni 1.17 (both as written and as libcni ≥ 1.2 picks from cniVersions)', async () => {
    const list = await readmeList();
    const v = judgeListVersions(list, [CILIUM_117]);
    expect(v.state, v.message).toBe('taken');
  });

  it("is a shipped 1.17-line list's shape: the same version and plugins, the shim right after cilium-cni", async () => {
    const list = await readmeList();
    const shipped = JSON.parse(await readFile(join(ROOT, 'conflist/aks-cilium-1.0.0.conflist'), 'utf8'));
    expect(list.cniVersion).toBe(shipped.cniVersion);
    expect(list.cniVersions).toEqual(shipped.cniVersions);
    expect(typesOf(list)).toEqual(typesOf(shipped));
    expect(list.plugins[1].delegate).toEqual(list.plugins[0].ipam);
  });

  it("the README's old list (1.1.0 with cniVersions up to 1.1.0) is one the same rule refuses: the test can fail", () => {
    const old = {
      cniVersion: '1.1.0',
      cniVersions: ['0.3.1', '1.0.0', '1.1.0'],
      name: 'cilium',
      plugins: [{ type: 'cilium-cni' }, { type: 'ipam-shim' }],
    };
    expect(judgeListVersions(old, [CILIUM_117])).toMatchObject({ state: 'refused', use: '1.0.0' });
  });
});
