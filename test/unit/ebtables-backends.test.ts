// Which ebtables backends residue detection reads (src/residue/backends.ts), over the real file probes
// (src/effects/ebtables-probe.ts) given fake node layouts: PATH entries and their symlinks, /sys/module,
// /proc/modules, modules.builtin, the kernel config. Every layout here is one a real node or image has.
import { describe, expect, it } from 'vitest';
import { probeBackends, type ProbeFiles } from '../../src/effects/ebtables-probe.js';
import { chooseBackends, type BackendSetting } from '../../src/residue/backends.js';

const RELEASE = '6.8.0-1041-azure';
const BUILTIN = `/lib/modules/${RELEASE}/modules.builtin`;

interface Layout {
  /** path → what it resolves to (itself for a plain file). */
  links?: Record<string, string>;
  /** Paths that exist (directories such as /sys/module/x, /proc/modules). */
  present?: string[];
  /** Readable files and their text. */
  texts?: Record<string, string>;
  /** The kernel config lines (a kernel without module support), with their source. */
  config?: { text: string; source: string };
}

/** A fake ProbeFiles over a layout, recording every read. */
function fake(l: Layout): ProbeFiles & { reads: string[] } {
  const reads: string[] = [];
  return {
    reads,
    exists: (p) => (l.present ?? []).includes(p) || p in (l.links ?? {}),
    realpath: (p) => l.links?.[p],
    read: (p) => {
      reads.push(p);
      return l.texts?.[p];
    },
    kernelConfig: () => {
      reads.push('kernel config');
      return l.config;
    },
    release: () => RELEASE,
  };
}

const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
// Debian/Ubuntu: `ebtables` is the alternative; ebtables-nft is xtables-nft-multi; ebtables-legacy a plain file.
const NFT_MULTI = '/usr/sbin/xtables-nft-multi';
const debian = (alternative: 'nft' | 'legacy'): Record<string, string> => ({
  '/usr/sbin/ebtables': alternative === 'nft' ? NFT_MULTI : '/usr/sbin/ebtables-legacy',
  '/usr/sbin/ebtables-nft': NFT_MULTI,
  '/usr/sbin/ebtables-legacy': '/usr/sbin/ebtables-legacy',
});
const MODULAR = ['/proc/modules', '/sys/module/nf_tables'];
const builtinWithout = 'kernel/net/bridge/bridge.ko\nkernel/net/netfilter/x_tables.ko\n';

const choose = (l: Layout, setting: BackendSetting = 'auto', path = PATH) => {
  const files = fake(l);
  return { ...chooseBackends(probeBackends(path, files), setting), reads: files.reads };
};

describe('chooseBackends over the file probes', () => {
  it("an nft node (modular kernel, ebtable_nat not loaded nor built in): only the node's own ebtables, one process", () => {
    const c = choose({ links: debian('nft'), present: MODULAR, texts: { [BUILTIN]: builtinWithout } });
    expect(c.read).toEqual([{ name: 'nft', program: 'ebtables' }]);
    expect(c.skipped).toEqual([
      {
        name: 'legacy',
        why: 'kernel',
        reason: expect.stringMatching(/ebtable_nat not loaded \(\/sys\/module\/ebtable_nat absent\) and not built in/),
      },
    ]);
    expect(c.reads).toEqual([BUILTIN]);
  });

  it("ebtable_nat loaded (someone used ebtables-legacy on this boot): both backends, the node's first", () => {
    const c = choose({ links: debian('nft'), present: [...MODULAR, '/sys/module/ebtable_nat'] });
    expect(c.read).toEqual([
      { name: 'nft', program: 'ebtables' },
      { name: 'legacy', program: 'ebtables-legacy' },
    ]);
    expect(c.reads).toEqual([]); // /sys/module answered: no file read at all
  });

  it('ebtable_nat built into a modular kernel (modules.builtin lists it): legacy is read', () => {
    const c = choose({
      links: debian('nft'),
      present: MODULAR,
      texts: { [BUILTIN]: `${builtinWithout}kernel/net/bridge/netfilter/ebtable_nat.ko\n` },
    });
    expect(c.read.map((b) => b.name)).toEqual(['nft', 'legacy']);
  });

  it("modules.builtin unreadable (the agent's image has no /lib/modules): a module not loaded is taken as absent, so listing does not load it", () => {
    const c = choose({ links: debian('nft'), present: MODULAR });
    expect(c.read.map((b) => b.name)).toEqual(['nft']);
    expect(c.skipped).toEqual([
      { name: 'legacy', why: 'kernel', reason: expect.stringContaining('modules.builtin unreadable, taken as not built in') },
    ]);
  });

  it('a kernel without module support and no readable config: could not tell, so the backend is read', () => {
    const c = choose({ links: debian('nft') });
    expect(c.read.map((b) => b.name)).toEqual(['nft', 'legacy']);
  });

  it("this machine: the node's ebtables points at ebtables-legacy, the kernel has no legacy nat table (no module support, /proc/config.gz): ebtables-nft alone", () => {
    const c = choose(
      {
        links: { ...debian('nft'), '/opt/legacy-first/ebtables': '/usr/sbin/ebtables-legacy' },
        config: {
          source: '/proc/config.gz',
          text: 'CONFIG_NF_TABLES=y\nCONFIG_NF_TABLES_BRIDGE=y\n# CONFIG_BRIDGE_NF_EBTABLES_LEGACY is not set\nCONFIG_BRIDGE_NF_EBTABLES=y\n',
        },
      },
      'auto',
      `/opt/legacy-first:${PATH}`,
    );
    expect(c.read).toEqual([{ name: 'nft', program: 'ebtables-nft' }]);
    expect(c.skipped).toEqual([
      {
        name: 'legacy',
        why: 'kernel',
        reason: expect.stringContaining('without CONFIG_BRIDGE_EBT_T_NAT and without module support (/proc/config.gz)'),
      },
    ]);
    expect(c.reads).toEqual(['kernel config']); // read once for both backends' questions
  });

  it("a legacy node whose kernel has the table and no nf_tables: the node's ebtables (legacy) alone", () => {
    const c = choose({ links: debian('legacy'), present: ['/proc/modules', '/sys/module/ebtable_nat'], texts: { [BUILTIN]: builtinWithout } });
    expect(c.read).toEqual([{ name: 'legacy', program: 'ebtables' }]);
    expect(c.skipped).toEqual([{ name: 'nft', why: 'kernel', reason: expect.stringContaining('nf_tables not loaded') }]);
  });

  it('an image without ebtables-legacy on a kernel that holds legacy tables: not read, and said (blind), never "no rules"', () => {
    const c = choose({
      links: { '/usr/sbin/ebtables': NFT_MULTI, '/usr/sbin/ebtables-nft': NFT_MULTI },
      present: [...MODULAR, '/sys/module/ebtable_nat'],
    });
    expect(c.read).toEqual([{ name: 'nft', program: 'ebtables' }]);
    expect(c.skipped).toEqual([
      {
        name: 'legacy',
        why: 'not-installed',
        blind: true,
        reason: expect.stringContaining('ebtables-legacy is not installed but the kernel has its tables'),
      },
    ]);
  });

  it('an old standalone ebtables (neither name): read as before, with no kernel probe and no false warning', () => {
    const c = choose({ links: { '/sbin/ebtables': '/sbin/ebtables' }, present: ['/proc/modules', '/sys/module/ebtable_nat'] });
    expect(c.read).toEqual([{ name: 'ebtables', program: 'ebtables' }]);
    expect(c.skipped.map((s) => [s.name, s.why, s.blind ?? false])).toEqual([
      ['nft', 'not-installed', false],
      ['legacy', 'not-installed', false],
    ]);
  });

  it('no ebtables at all: nothing to read', () => {
    const c = choose({ present: MODULAR, texts: { [BUILTIN]: builtinWithout } });
    expect(c.read).toEqual([]);
  });

  it('an explicit setting reads exactly those backends, without the kernel probe', () => {
    const layout = { links: debian('nft'), present: MODULAR, texts: { [BUILTIN]: builtinWithout } };
    const legacyOnly = choose(layout, ['legacy']);
    expect(legacyOnly.read).toEqual([{ name: 'legacy', program: 'ebtables-legacy' }]);
    expect(legacyOnly.skipped).toEqual([{ name: 'nft', why: 'not-selected', reason: expect.stringContaining('residue.ebtablesBackends') }]);
    expect(legacyOnly.reads).toEqual([]);
    // `ebtables` names the node's own, whichever backend it is.
    expect(choose(layout, ['ebtables']).read).toEqual([{ name: 'nft', program: 'ebtables' }]);
    expect(choose(layout, ['nft', 'legacy']).read.map((b) => b.program)).toEqual(['ebtables', 'ebtables-legacy']);
  });
});
