// One reader of the conf dir (issue 25): the plugin's CLI and agent (which conflist holds the shim, and whether
// the runtime uses it: /readyz and the metric), doctor (the built executable's installed and conflist checks) and
// install (which file it would edit) must agree with each other and with what the runtime does, over conf dirs
// with tricky contents. The runtime's rule, from containerd's go-cni over libcni 1.x (ConfFiles + sort.Strings,
// then the first file; CRI-O reads alike): files named *.conflist, *.conf, *.json that are not directories, in
// byte order; a .conflist needs a non-empty "plugins" list of typed plugins, a .conf/.json is ONE plugin (a list
// saved as .conf is refused: "network type not found"); a file it cannot load stops it (no network).
import { execa } from 'execa';
import { mkdir, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadShimConflist, shimEntryInUse } from '../../src/conflist.js';
import { renderConflist } from '../../src/install/conflist.js';
import { PLUGIN_DIR, scratch, SHIM } from '../support/shim/cni.js';
import { hostLocal, shimKeys } from '../support/shim/conf.js';

let s: Awaited<ReturnType<typeof scratch>>;
let dir: string;

beforeEach(async () => {
  s = await scratch();
  dir = join(s.dir, 'net.d');
  await mkdir(dir);
});
afterEach(() => s.cleanup());

const shim = () => shimKeys({ dirs: s, probeRewrite: false, delegate: hostLocal(s.dataDir, '10.9.0.0/24') });
const list = (name: string, plugins: unknown[]) => JSON.stringify({ cniVersion: '1.0.0', name, plugins }, null, 2);
const cilium = () => list('cilium', [{ type: 'cilium-cni', ipam: hostLocal(s.dataDir, '10.9.0.0/24') }, shim()]);
const bridge = () => list('other', [{ type: 'bridge', ipam: hostLocal(s.dataDir, '10.8.0.0/24') }]);
const write = async (files: Record<string, string | null>) => {
  for (const [name, text] of Object.entries(files)) {
    if (text === null) await mkdir(join(dir, name));
    else await writeFile(join(dir, name), text);
  }
};

interface Finding {
  check: string;
  verdict: string;
  summary: string;
}

/** What every reader says about the conf dir, by file name. */
async function readers(o: { doctor: boolean }) {
  const entry = await shimEntryInUse({ confDir: dir });
  const shimIn = await loadShimConflist({ confDir: dir }).then(
    (c) => basename(c.path),
    () => null,
  );
  const install = await renderConflist(dir, undefined);
  const out: Record<string, unknown> = {
    runtimeUses: entry.path ? basename(entry.path) : null,
    inUse: entry.inUse,
    shimIn,
    installTarget: install.action === 'missing' ? null : basename(install.path ?? ''),
    installSkips: (install.unreadable ?? []).map((u) => basename(u.path)),
  };
  if (o.doctor) {
    const r = await execa(SHIM, ['doctor', '--conf-dir', dir, '--cni-path', PLUGIN_DIR, '--json'], { reject: false });
    const findings: Finding[] = JSON.parse(r.stdout).findings;
    out.doctorInstalled = findings.find((f) => f.check === 'installed')?.verdict;
    out.doctorInvalid = findings
      .filter((f) => f.check === 'conflist' && f.summary.includes('is not a valid network config'))
      .map((f) => basename(f.summary.split(' ')[0]!));
  }
  return out;
}

describe('the conf dir as the runtime reads it, through every reader', () => {
  it('a directory named like a conflist and a disabled (.cilium_bak) file sort first: neither is a network config', async () => {
    await write({ '00-dir.conflist': null, '01-old.conflist.cilium_bak': bridge(), '05-cilium.conflist': cilium() });
    expect(await readers({ doctor: true })).toEqual({
      runtimeUses: '05-cilium.conflist',
      inUse: true,
      shimIn: '05-cilium.conflist',
      installTarget: '05-cilium.conflist',
      installSkips: [],
      doctorInstalled: 'ok',
      doctorInvalid: [],
    });
  });

  it('a single-plugin .conf sorting first, with the shim in its IPAM slot, is the config the runtime uses and holds the shim', async () => {
    const slot = JSON.stringify({ cniVersion: '1.0.0', name: 'slot', type: 'ptp', ipam: shim() });
    await write({ '01-ptp.conf': slot, '05-cilium.conflist': cilium() });
    expect(await readers({ doctor: true })).toEqual({
      runtimeUses: '01-ptp.conf',
      inUse: true,
      shimIn: '01-ptp.conf',
      installTarget: '05-cilium.conflist', // nothing can be chained into a .conf; install warns it sorts first
      installSkips: [],
      doctorInstalled: 'ok',
      doctorInvalid: [],
    });
  });

  it('an unparsable file sorting first: the runtime has no network, though a later conflist holds the shim', async () => {
    await write({ '01-broken.conflist': '{"cniVersion": "1.0.0", "plugins": [', '05-cilium.conflist': cilium() });
    expect(await readers({ doctor: true })).toEqual({
      runtimeUses: '01-broken.conflist',
      inUse: false,
      shimIn: '05-cilium.conflist',
      installTarget: '05-cilium.conflist',
      installSkips: ['01-broken.conflist'],
      doctorInstalled: 'problem',
      doctorInvalid: ['01-broken.conflist'],
    });
  });

  it('a conflist saved as .conf is refused by the runtime (no "type"): no reader takes the shim in it as usable', async () => {
    await write({ '01-cilium.conf': cilium(), '05-other.conflist': bridge() });
    expect(await readers({ doctor: false })).toEqual({
      runtimeUses: '01-cilium.conf',
      inUse: false,
      shimIn: null,
      installTarget: null,
      installSkips: ['01-cilium.conf'],
    });
  });

  it('lexical (byte) order, not numeric: 10-… is read before 9-…', async () => {
    await write({ '9-a.conflist': bridge(), '10-b.conflist': cilium() });
    expect(await readers({ doctor: true })).toEqual({
      runtimeUses: '10-b.conflist',
      inUse: true,
      shimIn: '10-b.conflist',
      installTarget: '10-b.conflist',
      installSkips: [],
      doctorInstalled: 'ok',
      doctorInvalid: [],
    });
  });
});
