// decideStatus(): whether a STATUS finding is answered or tolerated, and what the state dir remembers (each call
// is a fresh process). The CNI-call side (the real plugin, real delegate processes): test/e2e/status.test.ts.
import { describe, expect, it } from 'vitest';
import { decideStatus, type StatusCheck, type StatusMemo } from '../../src/status/decide.js';

const OK: StatusCheck = { kind: 'ok' };
const LASTING: StatusCheck = { kind: 'persistent' };
const MUTE: StatusCheck = { kind: 'unanswered' };
const GRACE = 15_000;

/** Runs calls in order through the memo, as the state dir carries it from one process to the next. */
function calls(steps: Array<[StatusCheck, number]>, graceMs = GRACE, start: StatusMemo = {}) {
  let memo = start;
  const out: Array<{ answer: string; write: boolean; memo: StatusMemo }> = [];
  for (const [check, now] of steps) {
    const d = decideStatus(check, memo, now, graceMs);
    if (d.memo) memo = d.memo;
    out.push({ answer: d.verdict.answer, write: d.memo !== undefined, memo });
  }
  return out;
}

describe('decideStatus', () => {
  it('a healthy node writes its memo once, then nothing on every later STATUS', () => {
    const r = calls([
      [OK, 1_000],
      [OK, 6_000],
      [OK, 11_000],
    ]);
    expect(r.map((x) => [x.answer, x.write])).toEqual([
      ['ok', true],
      ['ok', false],
      ['ok', false],
    ]);
    expect(r[2]!.memo).toEqual({ healthySince: 1_000 });
  });

  it('a single unanswered STATUS of a healthy network is tolerated; the next success ends the streak and says it recovered', () => {
    const d1 = decideStatus(MUTE, { healthySince: 0 }, 100_000, GRACE);
    expect(d1.verdict).toEqual({ answer: 'tolerated', failingForMs: 0, leftMs: GRACE });
    expect(d1.memo).toEqual({ healthySince: 0, failingSince: 100_000, failures: 1 });
    const d2 = decideStatus(OK, d1.memo!, 105_000, GRACE);
    expect(d2.verdict).toEqual({ answer: 'ok', recovered: true });
    expect(d2.memo).toEqual({ healthySince: 105_000 });
  });

  it('an unanswered streak is reported once it lasts statusGraceMs (kubelet polls every 5 s: the 4th call at 15 s)', () => {
    const r = calls([
      [OK, 0],
      [MUTE, 5_000],
      [MUTE, 10_000],
      [MUTE, 15_000],
      [MUTE, 20_000],
      [MUTE, 25_000],
    ]);
    expect(r.map((x) => x.answer)).toEqual(['ok', 'tolerated', 'tolerated', 'tolerated', 'fail', 'fail']);
    expect(decideStatus(MUTE, r[3]!.memo, 20_000, GRACE).verdict).toEqual({ answer: 'fail', failingForMs: 15_000 });
    // Once reported, the failure is remembered once, not rewritten on every poll.
    expect(r.map((x) => x.write)).toEqual([true, true, true, true, true, false]);
    expect(r[5]!.memo).toMatchObject({ failingSince: 5_000, failedAt: 20_000 });
  });

  it('failures between successes never add up: each streak starts its own grace', () => {
    const r = calls([
      [OK, 0],
      [MUTE, 5_000],
      [MUTE, 10_000],
      [OK, 15_000],
      [MUTE, 20_000],
      [MUTE, 30_000],
      [MUTE, 35_000],
    ]);
    expect(r.map((x) => x.answer)).toEqual(['ok', 'tolerated', 'tolerated', 'ok', 'tolerated', 'tolerated', 'fail']);
  });

  it('a lasting failure (state dir, missing delegate, its own error) is reported at once, and ends the grace of a later blip', () => {
    const r = calls([
      [OK, 0],
      [LASTING, 5_000],
      [LASTING, 10_000],
      [MUTE, 15_000],
      [OK, 20_000],
      [MUTE, 25_000],
    ]);
    expect(r.map((x) => x.answer)).toEqual(['ok', 'fail', 'fail', 'fail', 'ok', 'tolerated']);
    expect(r.map((x) => x.write)).toEqual([true, true, false, false, true, true]);
    expect(decideStatus(OK, r[3]!.memo, 20_000, GRACE).verdict).toEqual({ answer: 'ok', recovered: true });
  });

  it('no grace for a network never seen healthy (a fresh node, or after a lasting failure), nor with statusGraceMs 0', () => {
    expect(decideStatus(MUTE, {}, 1_000, GRACE).verdict).toEqual({ answer: 'fail' });
    expect(decideStatus(MUTE, { failedAt: 1 }, 1_000, GRACE)).toEqual({ verdict: { answer: 'fail' }, memo: undefined });
    expect(decideStatus(MUTE, { healthySince: 0 }, 1_000, 0).verdict).toEqual({ answer: 'fail' });
  });

  it('a clock that went back restarts the streak instead of ending (or stretching) the grace', () => {
    const d = decideStatus(MUTE, { healthySince: 0, failingSince: 50_000, failures: 3 }, 40_000, GRACE);
    expect(d.verdict).toEqual({ answer: 'tolerated', failingForMs: 0, leftMs: GRACE });
    expect(d.memo).toEqual({ healthySince: 0, failingSince: 40_000, failures: 1 });
  });
});
