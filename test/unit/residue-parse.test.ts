// Parser and matcher for azure-vnet residue, fed listings recorded from ebtables 1.8.9 (nft backend) on this
// kind of machine (test/fixtures/ebtables/README.md says how) plus one hand-written legacy-style listing.
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseArpTable, parseNeighbours } from '../../src/effects/neigh.js';
import { findOrphans, findResidue } from '../../src/residue/find.js';
import { parseLinkMacs } from '../../src/effects/links.js';
import { classifyRule, parsePrerouting, type ResidueRule } from '../../src/residue/parse.js';
import { exactIPv4, exactIPv6 } from '../../src/net/ip.js';
import { normaliseMac } from '../../src/net/mac.js';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/ebtables/${name}`, import.meta.url), 'utf8');
const residue = (listing: string) => parsePrerouting(listing).rules.filter((r): r is ResidueRule => r.kind !== 'other');
const brief = (rules: ResidueRule[]) => rules.map((r) => `${r.kind} ${r.ip} ${r.mac}`);

// What the recorded listing holds, in order: pod .32 (arpreply + dnat4), decoys .3/.30/.33, IPv6 pod ::32 and
// decoy ::320, and the ARP reply for the node IP .5 (same shape as a pod's; protected by never being asked for).
const EXPECTED = [
  'arpreply 10.240.0.32 00:0d:3a:30:47:42',
  'dnat4 10.240.0.32 00:0d:3a:30:47:42',
  'arpreply 10.240.0.3 a2:96:88:20:cb:c6',
  'dnat4 10.240.0.3 a2:96:88:20:cb:c6',
  'arpreply 10.240.0.30 00:0d:3a:30:47:30',
  'dnat4 10.240.0.30 00:0d:3a:30:47:30',
  'arpreply 10.240.0.33 00:0d:3a:30:47:33',
  'dnat4 10.240.0.33 00:0d:3a:30:47:33',
  'dnat6 fd00:10:240::32 00:0d:3a:30:47:42',
  'dnat6 fd00:10:240::320 00:0d:3a:30:47:20',
  'arpreply 10.240.0.5 00:0d:3a:30:47:01',
];

describe('parsePrerouting on recorded ebtables-nft output', () => {
  it.each(['nat-prerouting.txt', 'nat-prerouting-lmac2.txt', 'nat-prerouting-lc-ln.txt', 'nat-all.txt', 'ebtables-save-c.txt'])(
    '%s: classifies exactly the per-pod rules',
    (name) => {
      const parsed = parsePrerouting(fixture(name));
      expect(parsed.chainSeen).toBe(true);
      expect(parsed.rules).toHaveLength(16);
      expect(brief(residue(fixture(name)))).toEqual(EXPECTED);
    },
  );

  it('keeps the listed text (minus counters, numbering and -A PREROUTING) as the deletion argv', () => {
    const forms = ['nat-prerouting.txt', 'nat-prerouting-lc-ln.txt', 'ebtables-save-c.txt'].map((f) => residue(fixture(f)));
    expect(forms[1]!.map((r) => r.text)).toEqual(forms[0]!.map((r) => r.text));
    expect(forms[2]!.map((r) => r.text)).toEqual(forms[0]!.map((r) => r.text));
    const pod = forms[0]![1]!;
    expect(pod.text).toBe('-p IPv4 -i eth0 --ip-dst 10.240.0.32 -j dnat --to-dst 00:0d:3a:30:47:42 --dnat-target ACCEPT');
    expect(pod.args).toEqual(pod.text.split(' '));
  });

  it('never classifies node-wide or unusual rules', () => {
    const others = parsePrerouting(fixture('nat-prerouting.txt')).rules.filter((r) => r.kind === 'other');
    expect(others.map((r) => [r.text, r.reason])).toEqual([
      ['-p ARP -i eth0 --arp-op Reply -j dnat --to-dst ff:ff:ff:ff:ff:ff --dnat-target ACCEPT', 'not a per-pod shape'],
      ['-p IPv4 --ip-dst 10.240.0.0/16 -j dnat --to-dst 00:0d:3a:30:47:42 --dnat-target ACCEPT', 'not a single address: 10.240.0.0/16'],
      ['-p IPv4 -i eth0 --ip-dst ! 10.240.0.32 -j dnat --to-dst 00:0d:3a:30:47:42 --dnat-target ACCEPT', 'negated match'],
      [
        '-p ARP --arp-op Request --arp-ip-dst 10.240.0.32 --arp-mac-src 00:0d:3a:30:47:99 -j arpreply --arpreply-mac 00:0d:3a:30:47:42',
        'extra options --arp-mac-src',
      ],
      ['-p IPv4 -i eth0 --ip-dst 10.240.0.34 -j dnat --to-dst 01:00:5e:00:00:01 --dnat-target ACCEPT', 'group MAC 01:00:5e:00:00:01'],
    ]);
  });

  it('skips POSTROUTING (snat) and other chains in full listings and save output', () => {
    for (const f of ['nat-all.txt', 'ebtables-save-c.txt']) {
      expect(parsePrerouting(fixture(f)).rules.some((r) => r.text.includes('snat'))).toBe(false);
    }
  });

  it('an empty chain is seen but holds nothing; text without the chain is not "seen"', () => {
    expect(parsePrerouting(fixture('empty-prerouting.txt'))).toEqual({ chainSeen: true, rules: [] });
    expect(parsePrerouting('').chainSeen).toBe(false);
    expect(parsePrerouting(fixture('stderr-no-table.txt')).chainSeen).toBe(false);
  });

  it('ignores PREROUTING-named rules of another table in save output', () => {
    const text = '*broute\n:BROUTING ACCEPT\n-A PREROUTING -p IPv4 --ip-dst 10.1.1.1 -j dnat --to-dst 0:1:2:3:4:5\n';
    expect(parsePrerouting(text)).toEqual({ chainSeen: false, rules: [] });
  });
});

describe('legacy-style listing (unpadded MACs, /32 and /128 suffixes, trailing spaces)', () => {
  const rules = residue(fixture('legacy-style-handwritten.txt'));
  it('normalises addresses and MACs', () => {
    expect(brief(rules)).toEqual([
      'arpreply 10.240.0.32 00:0d:3a:30:47:42',
      'dnat4 10.240.0.32 00:0d:3a:30:47:42',
      'arpreply 10.240.0.3 a2:96:88:20:cb:c6',
      'dnat4 10.240.0.3 a2:96:88:20:cb:c6',
      'dnat6 fd00:10:240::32 00:0d:3a:30:47:42',
    ]);
  });
  it('keeps the text as listed (ebtables accepts it back for -D)', () => {
    expect(rules[0]!.text).toBe('-p ARP --arp-op Request --arp-ip-dst 10.240.0.32 -j arpreply --arpreply-mac 0:d:3a:30:47:42 --arpreply-target DROP');
    expect(rules[1]!.args).toContain('10.240.0.32/32');
  });
});

describe('classifyRule edge cases', () => {
  it.each([
    ['-p 0x0800 --ip-dst 10.0.0.1 -j dnat --to-dst 0:1:2:3:4:5 --dnat-target ACCEPT', 'dnat4 10.0.0.1 00:01:02:03:04:05'],
    ['-p ARP --arp-op Request --arp-ip-dst 10.0.0.1/255.255.255.255 -j arpreply --arpreply-mac A:B:C:D:E:F', 'arpreply 10.0.0.1 0a:0b:0c:0d:0e:0f'],
    ['-p IPv6 --ip6-dst FD00:0:0:0::0032/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff -j dnat --to-dst 0:1:2:3:4:5', 'dnat6 fd00::32 00:01:02:03:04:05'],
  ])('%s', (text, want) => {
    const r = classifyRule(text);
    expect(r.kind === 'other' ? r.reason : `${r.kind} ${r.ip} ${r.mac}`).toBe(want);
  });

  it.each([
    ['-p ARP --arp-op Request --arp-ip-dst 10.0.0.0/24 -j arpreply --arpreply-mac 0:1:2:3:4:5', 'not a single address'],
    ['-p IPv6 --ip6-dst fd00::/64 -j dnat --to-dst 0:1:2:3:4:5', 'not a single address'],
    ['-p IPv4 --ip-dst 10.0.0.01 -j dnat --to-dst 0:1:2:3:4:5', 'not a single address'],
    ['-p IPv4 --ip-dst 10.0.0.1 -j dnat --to-dst 0:1:2:3:4', 'bad MAC'],
    ['-p IPv4 --ip-dst 10.0.0.1 -j dnat --to-dst ff:ff:ff:ff:ff:ff', 'group MAC'],
    ['-p IPv4 --ip-dst 10.0.0.1 -j snat --to-src 0:1:2:3:4:5', 'not a per-pod shape'],
    ['-p IPv4 --ip-dst 10.0.0.1 --ip-dst 10.0.0.2 -j dnat --to-dst 0:1:2:3:4:5', 'repeated option'],
    ['-s Unicast -o eth0 -j snat --to-src 0:d:3a:30:47:1 --snat-arp --snat-target ACCEPT', 'unexpected token'],
    ['-p IPv4 --ip-dst 10.240.0.32 -j dnat --to-dst 0:1:2:3:4:5 --comment "x y"', 'quoted value'],
    ['-p IPv4 --ip-dst 10.240.0.32 -j dnat --to-dst 0:1:2:3:4:5 --comment x', 'extra options --comment'],
  ])('%s is not residue', (text, reason) => {
    const r = classifyRule(text);
    expect(r.kind).toBe('other');
    expect(r.kind === 'other' && r.reason).toContain(reason);
  });
});

describe('normalisers', () => {
  it('MACs', () => {
    expect(normaliseMac('0:d:3a:30:47:42')).toBe('00:0d:3a:30:47:42');
    expect(normaliseMac('A2:96:88:20:CB:C6')).toBe('a2:96:88:20:cb:c6');
    expect(normaliseMac('0:d:3a:30:47')).toBeUndefined();
    expect(normaliseMac('000:d:3a:30:47:42')).toBeUndefined();
  });
  it('addresses', () => {
    expect(exactIPv4('10.240.0.32/32')).toBe('10.240.0.32');
    expect(exactIPv4('10.240.0.32/31')).toBeUndefined();
    expect(exactIPv4('300.1.1.1')).toBeUndefined();
    expect(exactIPv6('fd00:10:240:0:0:0:0:32/128')).toBe('fd00:10:240::32');
    expect(exactIPv6('2001:db8:0:0:1:0:0:1')).toBe('2001:db8::1:0:0:1');
    expect(exactIPv6('fd00::32/127')).toBeUndefined();
  });
});

describe('findResidue: exact matching', () => {
  const rules = residue(fixture('nat-prerouting.txt'));
  const neighbours = parseNeighbours(
    // Recorded from `ip -j neigh show` (iproute2 6.1) in a scratch netns, plus an entry on a pod's own veth.
    '[{"dst":"10.240.0.33","dev":"azure0","state":["FAILED"]},' +
      '{"dst":"10.240.0.32","dev":"azure0","lladdr":"00:0d:3a:30:47:42","state":["PERMANENT"]},' +
      '{"dst":"10.240.0.3","dev":"azure0","lladdr":"a2:96:88:20:cb:c6","state":["PERMANENT"]},' +
      '{"dst":"10.240.0.32","dev":"lxc1234","lladdr":"0a:58:0a:f0:00:20","state":["PERMANENT"]},' +
      '{"dst":"10.240.0.32","dev":"eth0","lladdr":"12:34:56:78:9a:bc","state":["REACHABLE"]},' +
      '{"dst":"fd00:10:240::32","dev":"azure0","lladdr":"00:0d:3a:30:47:42","state":["PERMANENT"]}]',
  );
  const snap = { rules, neighbours };

  it('cleaning 10.240.0.32 touches neither .3, .30 nor .33, nor the IPv6 pod', () => {
    const found = findResidue(['10.240.0.32'], snap, { excludeDevs: ['lxc1234'] });
    expect(brief(found.rules)).toEqual(['arpreply 10.240.0.32 00:0d:3a:30:47:42', 'dnat4 10.240.0.32 00:0d:3a:30:47:42']);
    expect(found.neighbours).toEqual([{ ip: '10.240.0.32', dev: 'azure0', mac: '00:0d:3a:30:47:42', state: ['PERMANENT'] }]);
  });

  it('accepts CNI interface notation and non-canonical IPv6', () => {
    expect(brief(findResidue(['10.240.0.3/16'], snap).rules)).toEqual([
      'arpreply 10.240.0.3 a2:96:88:20:cb:c6',
      'dnat4 10.240.0.3 a2:96:88:20:cb:c6',
    ]);
    const v6 = findResidue(['FD00:10:240:0::0032/64'], snap);
    expect(brief(v6.rules)).toEqual(['dnat6 fd00:10:240::32 00:0d:3a:30:47:42']);
    expect(v6.neighbours.map((n) => n.dev)).toEqual(['azure0']);
  });

  it('an address nobody has finds nothing; garbage throws', () => {
    expect(findResidue(['10.240.0.4'], snap)).toEqual({ rules: [], neighbours: [], spared: [] });
    expect(() => findResidue(['10.240.0.3x'], snap)).toThrow(/not an IP address/);
  });

  it('property: residue of one address never includes another address', () => {
    const octet = fc.integer({ min: 0, max: 255 });
    fc.assert(
      fc.property(fc.uniqueArray(octet, { minLength: 2, maxLength: 12 }), (lasts) => {
        const all = lasts.flatMap((o) => {
          const mac = `0:d:3a:30:47:${o.toString(16)}`;
          return [
            classifyRule(`-p ARP --arp-op Request --arp-ip-dst 10.240.0.${o} -j arpreply --arpreply-mac ${mac} --arpreply-target DROP`),
            classifyRule(`-p IPv4 -i eth0 --ip-dst 10.240.0.${o}/32 -j dnat --to-dst ${mac} --dnat-target ACCEPT`),
          ] as ResidueRule[];
        });
        const found = findResidue([`10.240.0.${lasts[0]}`], { rules: all, neighbours: [] });
        return found.rules.length === 2 && found.rules.every((r) => r.ip === `10.240.0.${lasts[0]}`);
      }),
    );
  });
});

describe('findOrphans and link MACs', () => {
  it('reports rules whose MAC is on no local interface', () => {
    const rules = residue(fixture('nat-prerouting.txt'));
    const macs = parseLinkMacs(
      '[{"ifindex":1,"ifname":"lo","address":"00:00:00:00:00:00"},{"ifindex":2,"ifname":"eth0","address":"00:0D:3A:30:47:01"},' +
        '{"ifindex":3,"ifname":"azure0","address":"0:d:3a:30:47:42"}]',
    );
    expect([...macs]).toEqual(['00:0d:3a:30:47:01', '00:0d:3a:30:47:42']);
    expect(brief(findOrphans(rules, macs))).toEqual([
      'arpreply 10.240.0.3 a2:96:88:20:cb:c6',
      'dnat4 10.240.0.3 a2:96:88:20:cb:c6',
      'arpreply 10.240.0.30 00:0d:3a:30:47:30',
      'dnat4 10.240.0.30 00:0d:3a:30:47:30',
      'arpreply 10.240.0.33 00:0d:3a:30:47:33',
      'dnat4 10.240.0.33 00:0d:3a:30:47:33',
      'dnat6 fd00:10:240::320 00:0d:3a:30:47:20',
    ]);
  });
  it('empty ip output parses to nothing', () => {
    expect(parseNeighbours('')).toEqual([]);
    expect(parseLinkMacs('\n')).toEqual(new Set());
  });
});

describe('the pod-own neighbour rule (src/residue/own.ts)', () => {
  it("an entry on a result host interface or on the device of a host route to that exact address is the pod's own; a subnet route proves nothing", async () => {
    const { hostRouteDevices, isPodOwnNeighbour } = await import('../../src/residue/own.js');
    const { resultHostDevices } = await import('../../src/cni/result.js');
    const { parseRoutes } = await import('../../src/effects/routes.js');
    const routes = [
      ...parseRoutes(
        JSON.stringify([
          { dst: '10.240.0.32', dev: 'veth1', scope: 'host', flags: [] },
          { dst: '10.240.0.0/16', dev: 'azure0', scope: 'link', flags: [] },
          { dst: '10.240.0.40/32', dev: 'lxc9', table: 'local', type: 'local', flags: [] },
        ]),
        4,
      ),
      ...parseRoutes(JSON.stringify([{ dst: 'fd00::32', dev: 'veth1', flags: [] }]), 6),
    ];
    const routed = hostRouteDevices(routes);
    expect(isPodOwnNeighbour({ ip: '10.240.0.32', dev: 'veth1' }, { routed })).toBe(true);
    expect(isPodOwnNeighbour({ ip: 'fd00::32', dev: 'veth1' }, { routed })).toBe(true);
    expect(isPodOwnNeighbour({ ip: '10.240.0.32', dev: 'azure0' }, { routed })).toBe(false);
    expect(isPodOwnNeighbour({ ip: '10.240.0.33', dev: 'veth1' }, { routed })).toBe(false);
    expect(isPodOwnNeighbour({ ip: '10.240.0.40', dev: 'lxc9' }, { routed })).toBe(false);
    const devs = resultHostDevices({ interfaces: [{ name: 'veth2' }, { name: 'eth0', sandbox: '/run/netns/p' }] });
    expect(devs).toEqual(['veth2']);
    expect(isPodOwnNeighbour({ ip: '10.240.0.99', dev: 'veth2' }, { devs })).toBe(true);
    expect(isPodOwnNeighbour({ ip: '10.240.0.99', dev: 'eth0' }, { devs })).toBe(false);
  });
});

describe('parseArpTable on /proc/net/arp', () => {
  // As the kernel prints it: a PERMANENT entry (flags 0x6 = ATF_COM|ATF_PERM, azure-vnet's residue), a learnt one
  // (0x2), an incomplete one (0x0) and a proxy-ARP entry (0xc = ATF_PUBL|ATF_PERM: not a neighbour entry).
  const table = [
    'IP address       HW type     Flags       HW address            Mask     Device',
    '10.240.0.32      0x1         0x6         12:34:56:78:9A:BC     *        azure0',
    '10.240.0.1       0x1         0x2         02:fc:00:00:00:05     *        eth0',
    '10.240.0.77      0x1         0x0         00:00:00:00:00:00     *        azure0',
    '10.240.0.78      0x1         0xc         00:00:00:00:00:00     *        azure0',
    '',
  ].join('\n');

  it('keeps exactly the PERMANENT entries, with a normalised MAC', () => {
    expect(parseArpTable(table)).toEqual([{ ip: '10.240.0.32', dev: 'azure0', mac: '12:34:56:78:9a:bc', state: ['PERMANENT'] }]);
  });

  it('reads the header alone, and an empty file, as no entries', () => {
    expect(parseArpTable(table.split('\n')[0]!)).toEqual([]);
    expect(parseArpTable('')).toEqual([]);
  });
});
