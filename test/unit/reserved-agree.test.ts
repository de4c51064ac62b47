// STATUS (the verb's statusProblems) and doctor's reserved-ranges look answer one question — can the delegate's
// host-local ranges still give ADD an address? — through one decision (src/reserved/ranges.ts assessRanges).
// For each shape below: STATUS fails exactly when doctor reports a problem, and both say whether one range set
// or every set is the reason. Also: a malformed range set is named by its own index.
import { describe, expect, it } from 'vitest';
import { statusLook } from '../../src/fix-list/address-steps.js';
import type { NetConf } from '../../src/cni/config.js';
import { rangeFindings, RANGES_CHECK } from '../../src/reserved/doctor.js';
import { parseCidrs } from '../../src/net/cidr.js';

const hl = (extra: Record<string, unknown>) => ({ type: 'host-local', ...extra });
const cases: Array<{ name: string; delegate: Record<string, unknown>; reserved: string[]; refused: 'no' | 'one set' | 'every set' }> = [
  {
    name: 'two range sets, the second wholly reserved by two CIDRs together',
    delegate: hl({ ranges: [[{ subnet: '10.6.0.0/24' }], [{ subnet: 'fd00:6::/120' }]] }),
    reserved: ['fd00:6::/121', 'fd00:6::80/121'],
    refused: 'one set',
  },
  {
    name: 'a ranges entry whose rangeStart/rangeEnd lie in a reserved CIDR, its subnet not',
    delegate: hl({ ranges: [[{ subnet: '10.7.0.0/24', rangeStart: '10.7.0.8', rangeEnd: '10.7.0.15' }]] }),
    reserved: ['10.7.0.8/29'],
    refused: 'every set',
  },
  {
    name: 'a set of two ranges, one wholly reserved, one clean',
    delegate: hl({ ranges: [[{ subnet: '10.8.0.0/24' }, { subnet: '10.9.0.0/24' }]] }),
    reserved: ['10.8.0.0/24'],
    refused: 'no',
  },
  {
    name: 'top-level subnet wholly reserved beside a clean ranges set',
    delegate: hl({ subnet: '10.10.0.0/24', ranges: [[{ subnet: '10.11.0.0/24' }]] }),
    reserved: ['10.10.0.0/16'],
    refused: 'one set',
  },
  {
    name: 'a wholly reserved set beside an empty set',
    delegate: hl({ ranges: [[{ subnet: '10.12.0.0/24' }], []] }),
    reserved: ['10.12.0.0/24'],
    refused: 'one set',
  },
  { name: 'partly reserved only', delegate: hl({ ranges: [[{ subnet: '10.13.0.0/24' }]] }), reserved: ['10.13.0.0/28'], refused: 'no' },
  {
    name: 'a malformed second set',
    delegate: hl({ ranges: [[{ subnet: '10.14.0.0/24' }], [{ subnet: 'nonsense' }]] }),
    reserved: ['10.14.0.0/24'],
    refused: 'no',
  },
];

const statusOf = (delegate: unknown, reserved: string[]) =>
  statusLook({ name: 'n', settings: { reservedCIDRs: reserved, delegate } } as unknown as NetConf).problem;

describe("STATUS and doctor agree on the delegate's ranges", () => {
  for (const c of cases) {
    it(c.name, async () => {
      const status = await statusOf(c.delegate, c.reserved);
      const problems = rangeFindings([{ where: 'delegate', ipam: c.delegate }], parseCidrs(c.reserved)).filter(
        (f) => f.check === RANGES_CHECK && f.verdict === 'problem',
      );
      const statusSays = status === undefined ? 'no' : status.includes('host-local takes an address from every set') ? 'one set' : 'every set';
      const doctorSays = !problems.length
        ? 'no'
        : problems.every((f) => f.summary.includes('host-local takes an address from every range set'))
          ? 'one set'
          : 'every set';
      expect({ status: statusSays, doctor: doctorSays }).toEqual({ status: c.refused, doctor: c.refused });
    });
  }

  it('a malformed range set is named by its own index', () => {
    const f = rangeFindings(
      [{ where: 'delegate', ipam: hl({ ranges: [[{ subnet: '10.14.0.0/24' }], [{ subnet: '10.15.0.0/24' }, { subnet: 'nonsense' }]] }) }],
      parseCidrs(['10.14.0.0/24']),
    );
    expect(f.map((x) => x.summary)).toEqual([expect.stringMatching(/^cannot read the ranges of delegate: ipam\.ranges\[1\]\[1\]\.subnet: /)]);
  });
});
