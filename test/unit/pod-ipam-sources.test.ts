// Which IPAM configs give the network's pod ranges: one rule beside allocatorOf (src/conflist.ts), asked with the
// shipped conflists (conflist/) as they are, and each with a second IPAM-bearing plugin ahead of the allocator (a
// second interface's plugin, as a multi-interface chain lists it). Its range is another network's: the residue
// guard (networkPodRanges) and doctor's reserved-ranges look must not take it in.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { allocatorOf, podIpamSources, readShimConflist } from '../../src/conflist.js';

import { networkPodRanges } from '../../src/pods/ranges.js';

const DIR = join(__dirname, '../../conflist');
const SHIPPED = readdirSync(DIR).filter((f) => f.endsWith('.conflist'));
const OTHER = { type: 'macvlan', master: 'eth1', ipam: { type: 'host-local', ranges: [[{ subnet: '192.168.50.0/24' }]] } };

async function opened(file: string, extra: boolean) {
  const shim = (await readShimConflist(join(DIR, file)))!;
  if (!extra) return { conf: shim.conf, shim };
  const list = { ...shim.list, plugins: [OTHER, ...(shim.list.plugins as unknown[])] };
  return { conf: shim.conf, shim: { ...shim, list, index: shim.index + 1 } };
}

describe('the IPAM configs that give the pod ranges agree with allocatorOf', () => {
  it.each(SHIPPED.flatMap((f) => [[f, false] as const, [f, true] as const]))('%s (second IPAM plugin ahead: %s)', async (file, extra) => {
    const net = await opened(file, extra);
    const plugins = net.shim.list.plugins as unknown[];
    const alloc = net.conf.placement === 'chained' ? allocatorOf(plugins, net.shim.index)?.ipam : undefined;
    const expected = [net.conf.settings.delegate, alloc].filter(
      (x, i, all) => x && all.findIndex((y) => JSON.stringify(y) === JSON.stringify(x)) === i,
    );
    expect(podIpamSources(net).map((s) => s.ipam)).toEqual(expected);
    const ranges = networkPodRanges(net, []).ranges.map((r) => r.text);
    expect(ranges.filter((r) => r.startsWith('192.168.50.'))).toEqual([]);
  });
});
