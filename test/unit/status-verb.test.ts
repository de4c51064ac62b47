// cmdStatus in-process (scripted delegate, in-memory ledger): which delegate calls STATUS makes per placement and
// under which bound, and how the delegate's answers are classified. The memo lives in the ledger dir; the
// in-memory ledger has none, so nothing is remembered here (no grace): the grace is test/unit/status-decide.test.ts,
// the whole call test/e2e/status.test.ts.
import { describe, expect, it } from 'vitest';
import { CniError, ErrorCode } from '../../src/cni/errors.js';
import { DelegateNoAnswer } from '../../src/effects/delegate.js';
import { cmdStatus } from '../../src/verbs/status.js';
import { fakes, ipamConf, verbContext } from '../support/doubles/verb-context.js';

const slot = (keys: Record<string, unknown> = {}) => ({ ...ipamConf(keys), cniVersion: '1.1.0' });
const chained = { cniVersion: '1.1.0', name: 'unit', type: 'ipam-shim', stateDir: '/nonexistent', delegate: { type: 'host-local' } };
const failing = (e: Error) => () => {
  throw e;
};

describe('cmdStatus', () => {
  it('IPAM slot: asks the delegate for its STATUS at 1.1.0, every call bounded by statusTimeoutMs (not delegateTimeoutMs)', async () => {
    const f = fakes();
    await cmdStatus(verbContext('STATUS', slot({ statusTimeoutMs: 800, delegateTimeoutMs: 30_000 }), f));
    expect(f.delegate.calls.map((c) => [c.command, c.conf.cniVersion])).toEqual([['STATUS', '1.1.0']]);
    expect(f.delegate.timeouts).toHaveLength(2); // VERSION, then STATUS: each gets what is left of the one bound
    expect(f.delegate.timeouts.every((t) => t > 0 && t <= 800)).toBe(true);
  });

  it('chained: no delegate STATUS (the plugin in front asks the IPAM it relies on), only its VERSION', async () => {
    const f = fakes();
    await cmdStatus(verbContext('STATUS', chained, f));
    expect(f.delegate.calls).toEqual([]);
    expect(f.delegate.timeouts).toHaveLength(1);
  });

  it('a delegate that speaks no 1.1.0 is not asked for STATUS', async () => {
    const f = fakes({ delegate: { versions: ['0.3.1', '1.0.0'] } });
    await cmdStatus(verbContext('STATUS', slot(), f));
    expect(f.delegate.calls).toEqual([]);
  });

  it('what the delegate answered decides the message: its own 50/51 unchanged, other errors as 50 with their text, no answer said so', async () => {
    const answer = async (e: Error) => {
      const f = fakes({ delegate: { status: failing(e) } });
      return cmdStatus(verbContext('STATUS', slot({ statusTimeoutMs: 500 }), f)).then(
        () => 'ok',
        (x: CniError) => [x.code, x.msg, x.details],
      );
    };
    expect(await answer(new CniError(51, 'agent unreachable'))).toEqual([51, 'agent unreachable', undefined]);
    expect(await answer(new CniError(7, 'bad range'))).toEqual([50, 'delegate scripted STATUS failed', 'bad range']);
    expect(await answer(new DelegateNoAnswer(ErrorCode.TryAgainLater, 'delegate scripted STATUS timed out after 500 ms', {}, true))).toEqual([
      50,
      'delegate scripted STATUS did not answer within 500 ms',
      'killed with its process group',
    ]);
    expect(await answer(new CniError(11, 'busy'))).toEqual([50, 'delegate scripted STATUS asked to try again later', 'busy']);
  });
});
