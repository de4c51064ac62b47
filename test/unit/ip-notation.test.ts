// src/net/ip.ts's one rule for address notation: an IPv4-mapped IPv6 address is refused in every spelling, by every
// parser built on it; other IPv6 (IPv4-compatible and NAT64 included) stays IPv6; canonical text is one per address.
import { describe, expect, it } from 'vitest';
import { addressProblem, canonicalIp, exactIp, MappedAddressError, parseIp } from '../../src/net/ip.js';
import { parseCidr } from '../../src/net/cidr.js';
import { CniError, ErrorCode } from '../../src/cni/errors.js';
import { parseReservedCidrs } from '../../src/reserved/decision.js';

const MAPPED = [
  '::ffff:10.224.0.9',
  '::FFFF:10.224.0.9',
  '0:0:0:0:0:ffff:10.224.0.9',
  '::ffff:ae0:9',
  '0000:0000:0000:0000:0000:ffff:0ae0:0009',
  '::ffff:0:0',
  '::ffff:255.255.255.255',
];

describe('IPv4-mapped IPv6 addresses', () => {
  it.each(MAPPED)('%s is refused by parseIp, exactIp, parseCidr and addressProblem, naming the IPv4 address', (text) => {
    expect(() => parseIp(text)).toThrow(MappedAddressError);
    expect(exactIp(text)).toBeUndefined();
    expect(() => parseCidr(`${text}/120`)).toThrow(/IPv4-mapped/);
    expect(addressProblem(`${text}/24`)).toMatchObject({ kind: 'mapped' });
  });
  it('the message names the IPv4 address to write instead', () => {
    expect(() => parseIp('::ffff:10.224.0.9')).toThrow(/10\.224\.0\.9/);
  });
  it('reservedCIDRs with a mapped entry: code 7 naming it', () => {
    let err: unknown;
    try {
      parseReservedCidrs(['10.0.0.0/8', '::ffff:10.224.0.0/120']);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CniError);
    expect(err).toMatchObject({ code: ErrorCode.InvalidNetworkConfig });
    expect((err as CniError).details).toMatch(/\[1\].*IPv4-mapped/);
  });
  it('neighbours of the mapped range stay IPv6: IPv4-compatible, NAT64, ::fffe:…, ::1:ffff:…', () => {
    for (const text of ['::10.224.0.9', '64:ff9b::10.0.0.1', '::fffe:a00:9', '::1:ffff:a00:9', '::', '::1']) {
      expect(parseIp(text).family, text).toBe(6);
      expect(addressProblem(text)).toBeUndefined();
    }
    expect(parseCidr('::/0').prefix).toBe(0); // the whole space contains the mapped range; that is no mapped address
  });
});

describe('canonical text', () => {
  it('one text per address: RFC 5952 for IPv6, dotted quad for IPv4, the prefix dropped', () => {
    expect(canonicalIp('FD00:0:0::5/64')).toBe('fd00::5');
    expect(canonicalIp('fd00:0000:0000:0000:0000:0000:0000:0005')).toBe('fd00::5');
    expect(canonicalIp('2001:db8:0:0:1:0:0:1')).toBe('2001:db8::1:0:0:1');
    expect(canonicalIp('10.0.0.5/24')).toBe('10.0.0.5');
  });
  it('addressProblem: not an IP, a bad prefix, whitespace', () => {
    for (const text of ['10.0.0.256', '10.0.0.5/33', 'fd00::5/129', 'fd00::5/64/1', ' 10.0.0.5', 'x', 'fe80::1%eth0']) {
      expect(addressProblem(text), text).toMatchObject({ kind: 'invalid' });
    }
  });
});
