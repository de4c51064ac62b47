// src/reserved/decision.ts: the reservedCIDRs parse every caller shares (ADD, CHECK, STATUS, doctor, install) and
// the ADD/CHECK refusal.
import { describe, expect, it } from 'vitest';
import { CniError } from '../../src/cni/errors.js';
import { parseCidrs } from '../../src/net/cidr.js';
import { parseReservedCidrs, refuseReserved, reservedCidrs } from '../../src/reserved/decision.js';
import { reservedCheck } from '../../src/reserved/doctor.js';
import type { OpenNetwork } from '../../src/network/open.js';

const conf = (reservedCIDRs: string[]) => ({ name: 'n', settings: { reservedCIDRs } }) as unknown as Parameters<typeof refuseReserved>[0];
const thrown = (fn: () => unknown): CniError => {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(CniError);
    return e as CniError;
  }
  throw new Error('did not throw');
};

describe('reserved decisions', () => {
  it('a bad list is code 7 "invalid reservedCIDRs" with the parser\'s message as details, everywhere', async () => {
    const bad = ['10.0.0.0/8', 'banana'];
    const expected = (() => {
      try {
        parseCidrs(bad);
      } catch (e) {
        return (e as Error).message;
      }
    })();
    expect(expected).toContain('banana');
    for (const e of [
      thrown(() => parseReservedCidrs(bad)),
      thrown(() => reservedCidrs(conf(bad))),
      thrown(() => refuseReserved(conf(bad), ['10.1.0.1'])),
    ]) {
      expect([e.code, e.msg, e.details]).toEqual([7, 'invalid reservedCIDRs', expected]);
    }
    // doctor reports the same list problem with the parser's own words.
    const found = await reservedCheck.run({ conf: conf(bad) } as unknown as OpenNetwork);
    expect(found).toEqual([
      {
        check: 'reserved',
        verdict: 'problem',
        summary: expected,
        fix: 'correct reservedCIDRs in the conflist: every ADD fails with code 7 until then',
      },
    ]);
  });

  it('parses once per config object', () => {
    const c = conf(['10.0.0.0/8']);
    expect(reservedCidrs(c)).toBe(reservedCidrs(c));
  });

  it('refuses the first reserved address with code 100 naming it, the CIDR and the network; passes the others', () => {
    const c = conf(['10.224.0.0/24', 'fd00:224::/48']);
    expect(() => refuseReserved(c, ['10.0.0.5/24', 'fd00:1::5/64'])).not.toThrow();
    const e = thrown(() => refuseReserved(c, ['10.0.0.5/24', 'fd00:224::7/64', '10.224.0.9/24']));
    expect([e.code, e.msg]).toEqual([100, 'address fd00:224::7 is inside reserved CIDR fd00:224::/48 (network n)']);
  });
});
