// The one rule install, doctor and the agent judge a list's version with (src/cni/list-versions.ts): which
// versions a runtime sends (cniVersion as written for libcni < 1.2; the highest of cniVersion ∪ cniVersions up to
// 1.1.0 for libcni ≥ 1.2, libcni 1.3's conf.go) against what each plugin answered to VERSION. The answers are the
// real cilium-cni's: 1.17.5 (measured, issue 41) and a newer line with 1.1.0.
import { describe, expect, it } from 'vitest';
import { judgeListVersions, type PluginAnswer } from '../../src/cni/list-versions.js';

const CILIUM_117: PluginAnswer = {
  type: 'cilium-cni',
  path: '/opt/cni/bin/cilium-cni',
  versions: ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0'],
};
const CILIUM_NEWER: PluginAnswer = { ...CILIUM_117, versions: [...CILIUM_117.versions, '1.1.0'] };
const list = (cniVersion: string, cniVersions?: string[]) => ({
  cniVersion,
  ...(cniVersions ? { cniVersions } : {}),
  name: 'cilium',
  plugins: [{ type: 'cilium-cni' }, { type: 'ipam-shim' }],
});

describe("a list against its plugins' VERSION answers", () => {
  it("the README's old list (1.1.0, cniVersions up to 1.1.0) in front of cilium-cni 1.17: refused, both versions and 1.0.0 named", () => {
    const v = judgeListVersions(list('1.1.0', ['0.3.1', '1.0.0', '1.1.0']), [CILIUM_117]);
    expect(v).toMatchObject({ state: 'refused', written: '1.1.0', picked: '1.1.0', use: '1.0.0' });
    expect(v.refused).toEqual([{ ...CILIUM_117, refuses: ['1.1.0'] }]);
    expect(v.message).toContain('cilium-cni (/opt/cni/bin/cilium-cni) supports up to 1.0.0');
    expect(v.message).toContain('the list is at 1.1.0');
    expect(v.message).toContain('incompatible CNI versions');
    expect(v.message).toContain('use cniVersion "1.0.0" with nothing above 1.0.0 in cniVersions');
  });

  it('cniVersion 1.0.0 with 1.1.0 in cniVersions: libcni < 1.2 sends 1.0.0, but libcni ≥ 1.2 picks 1.1.0, so refused', () => {
    const v = judgeListVersions(list('1.0.0', ['1.0.0', '1.1.0']), [CILIUM_117]);
    expect(v).toMatchObject({ state: 'refused', written: '1.0.0', picked: '1.1.0', use: '1.0.0' });
    expect(v.refused[0]!.refuses).toEqual(['1.1.0']);
    expect(v.message).toContain('the list says cniVersion 1.0.0 and libcni ≥ 1.2 picks 1.1.0 from its cniVersions');
  });

  it('versions above libcni 1.3 (1.1.0) in cniVersions are dropped, as libcni drops them', () => {
    const v = judgeListVersions(list('1.0.0', ['1.0.0', '2.0.0']), [CILIUM_117]);
    expect(v).toMatchObject({ state: 'taken', written: '1.0.0', picked: '1.0.0' });
  });

  it.each([
    ['0.3.1 (AKS as CNS generates it)', list('0.3.1')],
    ['1.0.0', list('1.0.0')],
    ['1.0.0 with cniVersions up to 1.0.0', list('1.0.0', ['0.3.1', '1.0.0'])],
  ])('%s in front of cilium-cni 1.17: taken', (_name, l) => {
    const v = judgeListVersions(l, [CILIUM_117]);
    expect(v.state).toBe('taken');
    expect(v.refused).toEqual([]);
    expect(v.message).toBe(`cilium-cni takes ${l.cniVersion}`);
  });

  it('a 1.1.0 list in front of a cilium-cni that speaks 1.1.0 (newer than 1.17): taken, 1.1.0 the one to use', () => {
    const v = judgeListVersions(list('1.1.0', ['0.3.1', '1.0.0', '1.1.0']), [CILIUM_NEWER]);
    expect(v).toMatchObject({ state: 'taken', use: '1.1.0' });
  });

  it('a plugin that could not be asked is "not-asked", never "taken"; a refusal by another plugin still wins', () => {
    const absent: PluginAnswer = { type: 'cilium-cni', why: 'not in /opt/cni/bin' };
    const v = judgeListVersions(list('1.0.0'), [absent]);
    expect(v.state).toBe('not-asked');
    expect(v.message).toBe('could not ask cilium-cni (not in /opt/cni/bin) its VERSION: whether it takes 1.0.0 is not known');
    expect(v.use).toBe('1.1.0'); // nothing answered: only the shim's own versions bound it

    const portmap: PluginAnswer = { type: 'portmap', path: '/opt/cni/bin/portmap', versions: ['0.3.1', '0.4.0', '1.0.0'] };
    const both = judgeListVersions(list('1.1.0'), [absent, portmap]);
    expect(both).toMatchObject({ state: 'refused', use: '1.0.0' });
    expect(both.notAsked).toEqual([{ type: 'cilium-cni', why: 'not in /opt/cni/bin' }]);
  });

  it('the version to use is one every plugin that answered takes (and the shim: 0.3.0 and up)', () => {
    const old: PluginAnswer = { type: 'old', path: '/x/old', versions: ['0.1.0', '0.2.0', '0.3.1'] };
    expect(judgeListVersions(list('1.0.0'), [CILIUM_117, old])).toMatchObject({ state: 'refused', use: '0.3.1' });
    const none: PluginAnswer = { type: 'ancient', path: '/x/ancient', versions: ['0.1.0', '0.2.0'] };
    const v = judgeListVersions(list('1.0.0'), [none]);
    expect(v.use).toBeUndefined();
    expect(v.message).toContain('no version is taken by every plugin of the list');
  });
});
