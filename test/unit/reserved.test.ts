import fc from 'fast-check';
import { IPv4, IPv4CidrRange, IPv6, IPv6CidrRange } from 'ip-num';
import { isIPv6 } from 'node:net';
import { describe, expect, it } from 'vitest';
import { assessRanges, findReservedHit } from '../../src/reserved/ranges.js';
import { formatIp, parseIp } from '../../src/net/ip.js';
import { parseCidr, parseCidrs, rangeOverlap } from '../../src/net/cidr.js';

describe('parseCidrs', () => {
  it('parses IPv4 and IPv6 entries in order, with canonical text and integer bounds', () => {
    const [a, b] = parseCidrs(['10.224.0.0/24', 'FD00:10:240::/64']);
    expect(a).toEqual({ family: 4, first: 0x0ae00000n, last: 0x0ae000ffn, prefix: 24, text: '10.224.0.0/24', input: '10.224.0.0/24' });
    expect(b).toMatchObject({ family: 6, prefix: 64, text: 'fd00:10:240::/64', input: 'FD00:10:240::/64' });
    expect(b!.first).toBe(IPv6.fromString('fd00:10:240::').value);
    expect(b!.last).toBe(IPv6.fromString('fd00:10:240:0:ffff:ffff:ffff:ffff').value);
  });

  it('treats a bare address as a host CIDR (/32, /128)', () => {
    expect(parseCidr('10.0.0.7')).toMatchObject({ prefix: 32, first: 0x0a000007n, last: 0x0a000007n, text: '10.0.0.7/32' });
    expect(parseCidr('fd00::7')).toMatchObject({ prefix: 128, text: 'fd00::7/128' });
  });

  it('clears host bits but keeps the input text', () => {
    expect(parseCidr(' 10.4.76.5/24 ')).toMatchObject({ text: '10.4.76.0/24', input: '10.4.76.5/24' });
    expect(parseCidr('fd00::1/48').text).toBe('fd00::/48');
  });

  it('accepts /0 and overlapping or duplicate entries', () => {
    expect(parseCidr('0.0.0.0/0')).toMatchObject({ first: 0n, last: 0xffffffffn });
    expect(parseCidr('::/0').last).toBe((1n << 128n) - 1n);
    expect(parseCidrs(['10.0.0.0/8', '10.4.0.0/16', '10.4.0.0/16'])).toHaveLength(3);
  });

  it('rejects garbage with one message naming every bad entry and its index', () => {
    const bad = ['10.0.0.0/8', 'banana', '10.0.0.0/33', 'fd00::/129', '1.2.3', '', 'fe80::1%eth0', '10.0.0.0/8/9', '10.0.0.0/x', '256.1.1.1'];
    let msg = '';
    try {
      parseCidrs(bad);
    } catch (e) {
      msg = (e as Error).message;
    }
    expect(msg).toMatch(/^invalid reserved CIDR list: /);
    for (let i = 1; i < bad.length; i++) expect(msg).toContain(`[${i}] invalid CIDR`);
    expect(msg).not.toContain('[0]');
    expect(msg).toContain('"banana" is not an IPv4 or IPv6 address');
    expect(msg).toContain('prefix /33 is longer than /32 for IPv4');
    expect(msg).toContain('prefix /129 is longer than /128 for IPv6');
  });

  it('caps the error at 10 named entries', () => {
    expect(() => parseCidrs(Array.from({ length: 25 }, (_, i) => `bad${i}`))).toThrow(/\[9\] invalid CIDR "bad9".*; and 15 more$/);
  });

  it('agrees with ip-num on the bounds of random CIDRs (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 32 }), (n, p) => {
        const text = `${new IPv4(BigInt(n)).toString()}/${p}`;
        const ours = parseCidr(text);
        const theirs = IPv4CidrRange.fromCidr(text);
        return ours.first === theirs.getFirst().value && ours.last === theirs.getLast().value;
      }),
    );
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }), fc.integer({ min: 0, max: 128 }), (n, p) => {
        const text = `${new IPv6(n).toString()}/${p}`;
        const ours = parseCidr(text);
        const theirs = IPv6CidrRange.fromCidr(text);
        return ours.first === theirs.getFirst().value && ours.last === theirs.getLast().value;
      }),
    );
  });
});

describe('formatIp', () => {
  it('compresses IPv6 per RFC 5952', () => {
    const cases: Array<[string, string]> = [
      ['0:0:0:0:0:0:0:0', '::'],
      ['0:0:0:0:0:0:0:1', '::1'],
      ['fd00:0:0:0:0:0:0:0', 'fd00::'],
      ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'], // first of two equal runs
      ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'], // a single zero group is not compressed
      ['fd00:0:0:1:0:0:0:0', 'fd00:0:0:1::'], // the longest run wins
    ];
    for (const [full, want] of cases) expect(formatIp(6, IPv6.fromString(full).value)).toBe(want);
    expect(formatIp(4, 0x0a044c00n)).toBe('10.4.76.0');
  });

  it('round-trips random addresses (property)', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }), (n) => {
        const s = formatIp(6, n);
        return isIPv6(s) && parseIp(s).value === n && (s.match(/::/g) ?? []).length <= 1;
      }),
    );
  });
});

describe('findReservedHit', () => {
  const reserved = parseCidrs(['10.224.0.0/24', '10.224.0.0/16', 'fd00:10:240::/64', '192.168.1.9']);

  it('finds the first reserved CIDR (list order) holding the address, with or without a prefix', () => {
    expect(findReservedHit('10.224.0.5', reserved)).toEqual({ ip: '10.224.0.5', cidr: reserved[0] });
    expect(findReservedHit('10.224.0.5/16', reserved)?.cidr.text).toBe('10.224.0.0/24');
    expect(findReservedHit('10.224.9.1/16', reserved)?.cidr.text).toBe('10.224.0.0/16');
    expect(findReservedHit('fd00:10:240::32/64', reserved)).toMatchObject({ ip: 'fd00:10:240::32', cidr: { text: 'fd00:10:240::/64' } });
    expect(findReservedHit('192.168.1.9', reserved)?.cidr.text).toBe('192.168.1.9/32');
  });

  it('checks the edges and ignores the other family', () => {
    expect(findReservedHit('10.224.255.255', reserved)?.cidr.text).toBe('10.224.0.0/16');
    expect(findReservedHit('10.225.0.0', reserved)).toBeUndefined();
    expect(findReservedHit('10.223.255.255', reserved)).toBeUndefined();
    expect(findReservedHit('fd00:10:241::1', reserved)).toBeUndefined();
    expect(findReservedHit('10.0.0.1', [])).toBeUndefined();
  });

  it('throws on an address that does not parse', () => {
    expect(() => findReservedHit('not-an-ip', reserved)).toThrow(/invalid IP address "not-an-ip"/);
  });

  it('agrees with ip-num contains() on random addresses and CIDRs (property)', () => {
    const cidrArb = fc
      .tuple(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 8, max: 32 }))
      .map(([n, p]) => `${new IPv4(BigInt(n)).toString()}/${p}`);
    fc.assert(
      fc.property(fc.array(cidrArb, { maxLength: 8 }), fc.integer({ min: 0, max: 0xffffffff }), fc.boolean(), (texts, n, near) => {
        // `near` steers the address into the first CIDR's /8 so hits actually happen.
        const base = near && texts[0] ? (IPv4CidrRange.fromCidr(texts[0]).getFirst().value & 0xff000000n) | BigInt(n & 0xffffff) : BigInt(n);
        const ip = new IPv4(base);
        const expected = texts.find((t) => IPv4CidrRange.fromCidr(t).contains(ip));
        const hit = findReservedHit(ip.toString(), parseCidrs(texts));
        return (hit?.cidr.input ?? undefined) === expected;
      }),
    );
  });
});

describe('rangeOverlap', () => {
  const c = (s: string) => parseCidr(s);
  it('says how much of a lies inside b', () => {
    expect(rangeOverlap(c('10.4.76.0/24'), c('10.0.0.0/8'))).toBe('full');
    expect(rangeOverlap(c('10.0.0.0/8'), c('10.4.76.0/24'))).toBe('partial');
    expect(rangeOverlap(c('10.4.76.0/24'), c('10.4.76.0/24'))).toBe('full');
    expect(rangeOverlap(c('10.4.77.0/24'), c('10.4.76.0/24'))).toBe('none');
    expect(rangeOverlap(c('::/0'), c('0.0.0.0/0'))).toBe('none');
    expect(rangeOverlap({ family: 4, first: 5n, last: 15n }, { family: 4, first: 10n, last: 20n })).toBe('partial');
    expect(rangeOverlap({ family: 4, first: 5n, last: 10n }, { family: 4, first: 10n, last: 20n })).toBe('partial');
    expect(rangeOverlap({ family: 4, first: 5n, last: 9n }, { family: 4, first: 10n, last: 20n })).toBe('none');
  });
});

// host-local's ranges as the reserved-range decision (assessRanges, STATUS and doctor) reads them.
describe('assessRanges: host-local ranges against reserved CIDRs', () => {
  const reserved = parseCidrs(['10.240.0.32/27', '10.240.0.0/26', 'fd00:10:240::/120']);
  const pieces = (rs: Array<{ family: 4 | 6; first: bigint; last: bigint }>) =>
    rs.map((r) => `${formatIp(r.family, r.first)}-${formatIp(r.family, r.last)}`);
  const view = (ipam: unknown, cidrs = reserved) =>
    assessRanges(ipam, cidrs).map((set) => set.ranges.map((r) => [r.range.text, r.reserved.map((c) => c.text), pieces(r.unreserved)]));

  it('reads a top-level subnet with host-local defaults (network+1 .. broadcast-1)', () => {
    const r = assessRanges({ type: 'host-local', subnet: '10.240.0.0/16' }, [])[0]!.ranges[0]!.range;
    expect(r).toMatchObject({ subnet: '10.240.0.0/16', text: '10.240.0.1-10.240.255.254' });
    expect(assessRanges({ subnet: 'fd00::/64' }, [])[0]!.ranges[0]!.range.text).toBe('fd00::1-fd00::ffff:ffff:ffff:ffff');
  });

  it('names, per range, the reserved CIDRs over it and what is left of it', () => {
    const ipam = {
      type: 'host-local',
      ranges: [
        [{ subnet: '10.240.0.0/16', rangeStart: '10.240.0.32', rangeEnd: '10.240.0.63' }],
        [{ subnet: '10.241.0.0/16' }, { subnet: 'fd00:10:240::/64', rangeStart: 'fd00:10:240::10', rangeEnd: 'fd00:10:240::1ff' }],
      ],
    };
    expect(view(ipam)).toEqual([
      [['10.240.0.32-10.240.0.63', ['10.240.0.32/27', '10.240.0.0/26'], []]],
      [
        ['10.241.0.1-10.241.255.254', [], ['10.241.0.1-10.241.255.254']],
        ['fd00:10:240::10-fd00:10:240::1ff', ['fd00:10:240::/120'], ['fd00:10:240::100-fd00:10:240::1ff']],
      ],
    ]);
    const sets = assessRanges(ipam, reserved);
    expect(sets.map((x) => x.whollyReserved)).toEqual([true, false]);
    expect(sets[0]!.ranges[0]!.range).toMatchObject({ subnet: '10.240.0.0/16', rangeStart: '10.240.0.32', rangeEnd: '10.240.0.63' });
  });

  it('puts the top-level subnet first, then ranges; a range partly reserved keeps its other addresses', () => {
    expect(view({ subnet: '10.240.0.0/24', ranges: [[{ subnet: '10.9.0.0/24' }]] })).toEqual([
      [['10.240.0.1-10.240.0.254', ['10.240.0.32/27', '10.240.0.0/26'], ['10.240.0.64-10.240.0.254']]],
      [['10.9.0.1-10.9.0.254', [], ['10.9.0.1-10.9.0.254']]],
    ]);
  });

  it('a range split across two reserved CIDRs is partial in each and covered by both together', () => {
    const cidrs = parseCidrs(['10.0.0.0/24', '10.0.1.0/24']);
    const [set] = assessRanges({ ranges: [[{ subnet: '10.0.0.0/23', rangeStart: '10.0.0.10', rangeEnd: '10.0.1.10' }]] }, cidrs);
    const [r] = set!.ranges;
    expect(cidrs.map((c) => rangeOverlap(r!.range, c))).toEqual(['partial', 'partial']);
    expect(r!.reserved.map((c) => c.text)).toEqual(['10.0.0.0/24', '10.0.1.0/24']);
    expect(r!.usable).toBe(0n);
    expect(set!.whollyReserved).toBe(true);
  });

  it('gives nothing for configs that are not host-local shaped', () => {
    expect(assessRanges({ type: 'azure-ipam' }, reserved)).toEqual([]);
    expect(assessRanges(null, reserved)).toEqual([]);
    expect(assessRanges('host-local', reserved)).toEqual([]);
    expect(view({ subnet: '192.168.0.0/24' })).toEqual([[['192.168.0.1-192.168.0.254', [], ['192.168.0.1-192.168.0.254']]]]);
  });

  it('throws naming the path for malformed ranges', () => {
    expect(() => assessRanges({ ranges: [[{ subnet: 'nope' }]] }, reserved)).toThrow(/ipam\.ranges\[0\]\[0\]\.subnet: invalid CIDR "nope"/);
    expect(() => assessRanges({ ranges: [[{}]] }, reserved)).toThrow(/ipam\.ranges\[0\]\[0\]\.subnet: must be a CIDR string/);
    expect(() => assessRanges({ ranges: {} }, reserved)).toThrow(/ipam\.ranges: not an array/);
    expect(() => assessRanges({ subnet: '10.0.0.0/24', rangeStart: '10.0.1.1' }, reserved)).toThrow(
      /^ipam\.rangeStart: 10\.0\.1\.1 is outside subnet 10\.0\.0\.0\/24$/,
    );
    expect(() => assessRanges({ subnet: '10.0.0.5' }, reserved)).toThrow(/^ipam\.subnet: "10\.0\.0\.5" has no prefix length$/);
  });
});
