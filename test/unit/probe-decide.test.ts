// decide(): the one probe-rewrite decision ADD, doctor, `probe-rewrite status` and the agent call.
import { describe, expect, it } from 'vitest';
import { decide, type ProbeFacts } from '../../src/probe-rewrite/decide.js';

const facts = (f: Partial<ProbeFacts>): ProbeFacts => ({ table: 'absent', uplink: true, bpf: false, mode: 'auto', ipv6: true, ...f });

describe('decide', () => {
  it('a drifted table next to a BPF handler: auto leaves it to BPF, whether or not the caller has looked yet', () => {
    // ADD looks for BPF only when told to; doctor always has. Both must end at the same answer.
    const add = decide(facts({ table: 'drifted', bpf: undefined }));
    expect(add.action).toBe('look-for-bpf');
    const addAfterLooking = decide(facts({ table: 'drifted', bpf: true }));
    const doctor = decide(facts({ table: 'drifted', bpf: true }));
    expect(addAfterLooking).toEqual({ action: 'none', verdict: 'handled-by-bpf', problem: false });
    expect(doctor).toEqual(addAfterLooking);
  });

  it('on keeps the table regardless of BPF, and says drifted until it is repaired', () => {
    expect(decide(facts({ mode: 'on', table: 'drifted', bpf: true }))).toEqual({ action: 'reinstall', verdict: 'drifted', problem: true });
    expect(decide(facts({ mode: 'on', table: 'drifted', bpf: undefined }))).toEqual({ action: 'reinstall', verdict: 'drifted', problem: true });
    expect(decide(facts({ mode: 'on', table: 'absent', bpf: true }))).toEqual({ action: 'install', verdict: 'absent', problem: true });
    expect(decide(facts({ mode: 'on', table: 'matching', bpf: true }))).toEqual({ action: 'none', verdict: 'ok', problem: false });
  });

  it('auto without BPF installs an absent table and repairs a drifted one; a matching one needs no BPF look', () => {
    expect(decide(facts({ table: 'absent', bpf: false }))).toEqual({ action: 'install', verdict: 'absent', problem: true });
    expect(decide(facts({ table: 'drifted', bpf: false }))).toEqual({ action: 'reinstall', verdict: 'drifted', problem: true });
    expect(decide(facts({ table: 'absent', bpf: undefined })).action).toBe('look-for-bpf');
    expect(decide(facts({ table: 'matching', bpf: undefined }))).toEqual({ action: 'none', verdict: 'ok', problem: false });
    expect(decide(facts({ table: 'matching', bpf: true }))).toEqual({ action: 'none', verdict: 'handled-by-bpf', problem: false });
    expect(decide(facts({ table: 'absent', bpf: true }))).toEqual({ action: 'none', verdict: 'handled-by-bpf', problem: false });
  });

  it('not needed (auto without IPv6, or off): never acts; a drifted table is still reported', () => {
    for (const f of [facts({ ipv6: false }), facts({ mode: 'off' })])
      expect(decide(f)).toEqual({ action: 'none', verdict: 'not-needed', problem: false });
    expect(decide(facts({ ipv6: false, table: 'drifted' }))).toEqual({ action: 'none', verdict: 'drifted', problem: true });
    expect(decide(facts({ mode: 'off', table: 'drifted', bpf: undefined })).action).toBe('none');
    expect(decide(facts({ mode: 'off', bpf: true })).verdict).toBe('handled-by-bpf');
    expect(decide(facts({ mode: 'on', ipv6: false })).action).toBe('install'); // on: needed whatever the ledger holds
  });

  it('nft unavailable or no uplink: fail when needed, otherwise nothing', () => {
    expect(decide(facts({ table: 'nft-unavailable', bpf: undefined }))).toEqual({ action: 'fail', verdict: 'nft-unavailable', problem: true });
    expect(decide(facts({ table: 'nft-unavailable', ipv6: false }))).toEqual({ action: 'none', verdict: 'not-needed', problem: false });
    expect(decide(facts({ uplink: false, bpf: undefined }))).toEqual({ action: 'fail', verdict: 'no-uplink', problem: true });
    expect(decide(facts({ uplink: false, table: 'drifted', ipv6: false }))).toEqual({ action: 'none', verdict: 'no-uplink', problem: true });
    expect(decide(facts({ uplink: false, ipv6: false }))).toEqual({ action: 'none', verdict: 'not-needed', problem: false });
  });
});
