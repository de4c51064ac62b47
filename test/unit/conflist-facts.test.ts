// Two conflist facts with one owner each, every caller asked the same tricky lists: whether (and where) an entry
// holds the shim (src/cni/config.ts shimPlacement: the plugin's parseNetConf, the conf dir's reader, install's
// conflist surgery) and which plugin allocates for the chained shim (src/conflist.ts allocatorOf: install's
// `delegate`, doctor's mirrored IPAM config).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { holdsShim, parseNetConf, shimPlacement } from '../../src/cni/config.js';
import { readShimConflist } from '../../src/conflist.js';
import { inspectConflist } from '../../src/install/conflist-edit.js';
import { renderConflist } from '../../src/install/conflist.js';
import { effectiveIpam } from '../../src/doctor/ipam-config.js';
import type { OpenNetwork } from '../../src/network/open.js';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function confDir(list: unknown): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'conflist-facts-'));
  dirs.push(dir);
  await writeFile(join(dir, '05-net.conflist'), JSON.stringify(list, null, 2));
  return join(dir, '05-net.conflist');
}

const DELEGATE = { type: 'host-local', subnet: '10.0.0.0/24' };
const ENTRIES: Array<[string, Record<string, unknown>, 'chained' | 'ipam' | undefined]> = [
  ['chained', { type: 'ipam-shim', delegate: DELEGATE }, 'chained'],
  ['in an IPAM slot', { type: 'ptp', ipam: { type: 'ipam-shim', delegate: DELEGATE } }, 'ipam'],
  ['chained, its own ipam naming the shim too', { type: 'ipam-shim', delegate: DELEGATE, ipam: { type: 'ipam-shim' } }, 'chained'],
  ['an ipam that is a string', { type: 'ptp', ipam: 'ipam-shim' }, undefined],
  ['another plugin', { type: 'ptp', ipam: { type: 'host-local' } }, undefined],
];

describe('does this entry hold the shim, and where: one rule (shimPlacement), every caller', () => {
  it.each(ENTRIES)('%s', async (_, entry, want) => {
    const list = { cniVersion: '1.0.0', name: 'net', plugins: [{ type: 'cilium-cni' }, entry] };
    const shape = inspectConflist(JSON.stringify(list));
    const install = shape.chained.includes(1) ? 'chained' : shape.ipamSlot === 1 ? 'ipam' : undefined;
    const confDirReader = (await readShimConflist(await confDir(list)))?.conf.placement;
    let plugin: string | undefined;
    try {
      plugin = parseNetConf({ ...entry, cniVersion: '1.0.0', name: 'net' }).placement;
    } catch {
      plugin = undefined;
    }
    expect({ rule: shimPlacement(entry), holdsShim: holdsShim(entry), install, confDirReader, plugin }).toEqual({
      rule: want,
      holdsShim: want !== undefined,
      install: want,
      confDirReader: want,
      plugin: want,
    });
  });
});

const IPAM = { type: 'azure-ipam' };
const LISTS: Array<[string, unknown[]]> = [
  ['cilium-cni with its ipam', [{ type: 'cilium-cni', ipam: IPAM }]],
  [
    'cilium-cni after another plugin',
    [
      { type: 'bandwidth', ipam: { type: 'other' } },
      { type: 'cilium-cni', ipam: IPAM },
    ],
  ],
  [
    'cilium-cni, then a plugin with an ipam',
    [
      { type: 'cilium-cni', ipam: IPAM },
      { type: 'portmap', ipam: { type: 'other' } },
    ],
  ],
];

describe('which plugin allocates for the chained shim: one rule (allocatorOf), install and doctor', () => {
  it.each(LISTS)('%s', async (_, plugins) => {
    // install: the entry it writes (without a delegate of the operator's) takes the allocator's ipam.
    const path = await confDir({ cniVersion: '1.0.0', name: 'net', plugins });
    const rendered = await renderConflist(join(path, '..'), {});
    const written = JSON.parse(rendered.text!).plugins as Array<Record<string, unknown>>;
    const index = written.findIndex(holdsShim);
    // doctor: the same list with the shim's entry holding no delegate mirrors the allocator's ipam.
    const { delegate, ...bare } = written[index]!;
    const list = { name: 'net', plugins: written.map((p, i) => (i === index ? bare : p)) };
    const net = { conf: { settings: {} }, shim: { path, list, index } } as unknown as OpenNetwork;
    expect({ install: delegate, doctor: effectiveIpam(net) }).toEqual({ install: IPAM, doctor: IPAM });
  });
});
