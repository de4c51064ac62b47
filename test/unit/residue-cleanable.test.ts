// THE rule for what residue cleaning may touch (src/residue/cleanable.ts), the pure parts around it (the node's
// addresses as `ip -j addr` prints them, its next hops, the network's pod ranges) and findResidue applying it.
import { describe, expect, it } from 'vitest';
import { parseNodeAddresses } from '../../src/effects/node-addresses.js';
import { pointsAtNode, refusal, routeGateways, type NodeFacts } from '../../src/residue/cleanable.js';
import type { PodRanges } from '../../src/pods/view.js';
import { findResidue } from '../../src/residue/find.js';
import { classifyRule, type ResidueRule } from '../../src/residue/parse.js';
import { networkPodRanges } from '../../src/pods/ranges.js';
import { parseRoutes } from '../../src/effects/routes.js';
import { parseNetConf } from '../../src/cni/config.js';

// `ip -j addr show` of an azure-vnet node, trimmed (iproute2 6.1's keys).
const IP_ADDR = JSON.stringify([
  {
    ifindex: 1,
    ifname: 'lo',
    address: '00:00:00:00:00:00',
    addr_info: [
      { family: 'inet', local: '127.0.0.1', prefixlen: 8 },
      { family: 'inet6', local: '::1', prefixlen: 128 },
    ],
  },
  { ifindex: 2, ifname: 'eth0', address: '00:0d:3a:30:47:01', master: 'azure0', addr_info: [] },
  {
    ifindex: 3,
    ifname: 'azure0',
    address: '00:0D:3A:30:47:01',
    addr_info: [
      { family: 'inet', local: '10.240.0.5', prefixlen: 16 },
      { family: 'inet6', local: 'fd00:10:240:0:0:0:0:5', prefixlen: 64 },
      { family: 'inet6', local: 'fe80::20d:3aff:fe30:4701', prefixlen: 64 },
    ],
  },
]);
const ROUTES_V4 = JSON.stringify([
  { dst: 'default', gateway: '10.240.0.1', dev: 'azure0' },
  {
    dst: '198.51.100.0/24',
    nexthops: [
      { gateway: '10.240.0.62', dev: 'azure0' },
      { gateway: '10.240.0.63', dev: 'azure0' },
    ],
  },
  { dst: '10.240.0.32', dev: 'veth1', scope: 'host' },
]);

const node: NodeFacts = { ...parseNodeAddresses(IP_ADDR), gateways: routeGateways(parseRoutes(ROUTES_V4, 4)) };
const range = (first: string, last: string): PodRanges['ranges'][number] => {
  const v = (ip: string) => ip.split('.').reduce((a, o) => a * 256n + BigInt(o), 0n);
  return { family: 4, first: v(first), last: v(last), text: `${first}-${last}` };
};
const ranges: PodRanges = { ranges: [range('10.240.0.32', '10.240.0.63')], source: 'delegate host-local ranges' };

describe("the node's addresses (ip -j addr show)", () => {
  it('every interface, both families, canonical; MACs normalised, loopback dropped', () => {
    expect([...node.ips]).toEqual([
      ['127.0.0.1', 'lo'],
      ['::1', 'lo'],
      ['10.240.0.5', 'azure0'],
      ['fd00:10:240::5', 'azure0'],
      ['fe80::20d:3aff:fe30:4701', 'azure0'],
    ]);
    expect([...node.macs.keys()]).toEqual(['00:0d:3a:30:47:01']);
    expect([...node.gateways]).toEqual([
      ['10.240.0.1', 'azure0'],
      ['10.240.0.62', 'azure0'],
      ['10.240.0.63', 'azure0'],
    ]);
  });

  it('output that is not a list is an error, not "no addresses"', () => {
    expect(() => parseNodeAddresses('{"ifname":"eth0"}')).toThrow(/not a JSON list/);
    expect(() => parseNodeAddresses('[{"ifname":')).toThrow();
  });
});

describe('refusal: may residue for this address be removed', () => {
  it('never for an address the node holds, IPv4 or IPv6, whatever the ranges', () => {
    expect(refusal('10.240.0.5', node)).toMatchObject({ kind: 'node-address', why: expect.stringContaining('on azure0') });
    expect(refusal('fd00:10:240::5', node, ranges)).toMatchObject({ kind: 'node-address' });
    expect(refusal('127.0.0.1', node)).toMatchObject({ kind: 'node-address' });
  });

  it('never for a next hop of the node (the gateway, a multipath router)', () => {
    expect(refusal('10.240.0.1', node)).toMatchObject({ kind: 'next-hop' });
    expect(refusal('10.240.0.63', node, ranges)).toMatchObject({ kind: 'next-hop' });
  });

  it("an address only the runtime's cache names: only inside the network's pod ranges", () => {
    expect(refusal('10.240.0.40', node, ranges)).toBeUndefined();
    expect(refusal('10.240.0.64', node, ranges)).toMatchObject({ kind: 'outside-ranges', why: expect.stringContaining('10.240.0.32-10.240.0.63') });
    expect(refusal('192.168.77.7', node, ranges)).toMatchObject({ kind: 'outside-ranges' });
    expect(refusal('fd00:10:240::40', node, ranges)).toMatchObject({ kind: 'outside-ranges' });
    // No range known at all: nothing the cache names is a pod's.
    expect(refusal('10.240.0.40', node, { ranges: [], source: 'none' })).toMatchObject({
      kind: 'outside-ranges',
      why: expect.stringContaining('unknown'),
    });
  });

  it('a ledger, ADD or --ip address is judged without ranges (the node rule still holds)', () => {
    expect(refusal('192.168.77.7', node)).toBeUndefined();
    expect(refusal('10.240.0.5', node)).toBeDefined();
  });
});

describe("findResidue spares the node's own plumbing", () => {
  const rule = (text: string) => classifyRule(text) as ResidueRule;
  const rules = [
    rule('-p ARP --arp-op Request --arp-ip-dst 10.240.0.5 -j arpreply --arpreply-mac 00:0d:3a:30:47:01'),
    rule('-p ARP --arp-op Request --arp-ip-dst 10.240.0.40 -j arpreply --arpreply-mac 0:d:3a:30:47:1'),
    rule('-p ARP --arp-op Request --arp-ip-dst 10.240.0.41 -j arpreply --arpreply-mac 00:0d:3a:30:47:42'),
    rule('-p IPv4 -i eth0 --ip-dst 10.240.0.41 -j dnat --to-dst 00:0d:3a:30:47:42 --dnat-target ACCEPT'),
    rule('-p IPv6 -i eth0 --ip6-dst fd00:10:240::5 -j dnat --to-dst 00:0d:3a:30:47:42 --dnat-target ACCEPT'),
  ];
  const neighbours = [
    { ip: '10.240.0.1', dev: 'azure0', mac: '12:34:56:78:9a:bc', state: ['PERMANENT'] },
    { ip: '10.240.0.41', dev: 'azure0', mac: '00:0d:3a:30:47:42', state: ['PERMANENT'] },
  ];
  const ips = ['10.240.0.5', '10.240.0.40', '10.240.0.41', 'fd00:10:240::5', '10.240.0.1'];

  it("without the node's facts everything matching is found (the effectful callers always pass them)", () => {
    const found = findResidue(ips, { rules, neighbours });
    expect(found.rules).toHaveLength(5);
    expect(found.neighbours).toHaveLength(2);
  });

  it("with them: the node's addresses, next hops and rules to its MACs are left, and listed as spared", () => {
    const found = findResidue(ips, { rules, neighbours }, { node });
    expect(found.rules.map((r) => r.text)).toEqual([rules[2]!.text, rules[3]!.text]);
    expect(found.neighbours).toEqual([neighbours[1]]);
    expect(found.spared.map((s) => s.why)).toEqual([
      expect.stringContaining('10.240.0.5 is an address of this node (on azure0)'),
      expect.stringContaining('00:0d:3a:30:47:01 is a MAC of this node (azure0)'),
      expect.stringContaining('fd00:10:240::5 is an address of this node'),
      expect.stringContaining('10.240.0.1 is a next hop'),
    ]);
  });

  it('pointsAtNode compares normalised MACs', () => {
    expect(pointsAtNode(rules[1]!, node)).toBe(true);
    expect(pointsAtNode(rules[2]!, node)).toBe(false);
  });
});

describe("the network's pod ranges", () => {
  const shimOf = (list: Record<string, unknown>, index: number) => ({
    path: '/etc/cni/net.d/x.conflist',
    list,
    index,
    conf: parseNetConf({ cniVersion: list.cniVersion, name: list.name, ...(list.plugins as Array<Record<string, unknown>>)[index] }),
  });
  const net = (list: Record<string, unknown>, index: number) => {
    const shim = shimOf(list, index);
    return { conf: shim.conf, shim };
  };
  const hostLocal = { type: 'host-local', ranges: [[{ subnet: '10.240.0.0/16', rangeStart: '10.240.0.32', rangeEnd: '10.240.0.63' }]] };

  it("the delegate's host-local ranges", () => {
    const list = { cniVersion: '1.0.0', name: 'n', plugins: [{ type: 'ptp', ipam: { type: 'ipam-shim', delegate: hostLocal } }] };
    const r = networkPodRanges(net(list, 0), [{ subnets: ['10.250.0.0/16'] }]);
    expect(r.ranges.map((x) => x.text)).toEqual(['10.240.0.32-10.240.0.63']);
    expect(r.source).toBe('delegate host-local ranges');
  });

  it("chained: the main plugin's host-local ranges", () => {
    const list = { cniVersion: '1.0.0', name: 'n', plugins: [{ type: 'ptp', ipam: hostLocal }, { type: 'ipam-shim' }] };
    expect(networkPodRanges(net(list, 1), []).ranges.map((x) => x.text)).toEqual(['10.240.0.32-10.240.0.63']);
  });

  it("azure-ipam (no readable ranges): the subnets the ledger's addresses were handed out in; none known: no range", () => {
    const list = { cniVersion: '0.3.1', name: 'cilium', plugins: [{ type: 'cilium-cni', ipam: { type: 'azure-ipam' } }, { type: 'ipam-shim' }] };
    const r = networkPodRanges(net(list, 1), [{ subnets: ['10.240.0.0/16'] }, { subnets: ['10.240.0.0/16', 'fd00:10:240::/64'] }, {}]);
    expect(r.ranges.map((x) => (x as { text: string }).text)).toEqual(['10.240.0.0/16', 'fd00:10:240::/64']);
    expect(r.source).toBe("the ledger's subnets");
    expect(networkPodRanges(net(list, 1), []).ranges).toEqual([]);
  });
});
