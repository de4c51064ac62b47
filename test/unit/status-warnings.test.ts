// When STATUS logs a lasting warning (src/status/warnings.ts): on appearing, on changing, once an hour while it
// lasts, and a single "gone" when it clears.
import { describe, expect, it } from 'vitest';
import { decideWarnings, WARNING_REPEAT_MS, warningFingerprint } from '../../src/status/warnings.js';

const w = warningFingerprint([{ fix: 'reserved', msg: 'overlap', fields: { ranges: ['10.0.0.0-10.0.0.255'] } }]);
const t0 = 1_800_000_000_000;

describe('STATUS warnings', () => {
  it('logs a new warning and remembers it', () => {
    expect(decideWarnings(w, {}, t0)).toEqual({ log: true, cleared: false, memo: { warned: w, warnedAt: t0 } });
  });
  it('stays quiet while it lasts, until the hour is up', () => {
    expect(decideWarnings(w, { warned: w, warnedAt: t0 }, t0 + 5_000)).toEqual({ log: false, cleared: false, memo: undefined });
    expect(decideWarnings(w, { warned: w, warnedAt: t0 }, t0 + WARNING_REPEAT_MS)).toMatchObject({
      log: true,
      memo: { warnedAt: t0 + WARNING_REPEAT_MS },
    });
  });
  it('logs again at once when the warning changes, or the clock went back', () => {
    const other = warningFingerprint([{ fix: 'reserved', msg: 'overlap', fields: { ranges: ['10.0.1.0-10.0.1.255'] } }]);
    expect(decideWarnings(other, { warned: w, warnedAt: t0 }, t0 + 1)).toMatchObject({ log: true, memo: { warned: other } });
    expect(decideWarnings(w, { warned: w, warnedAt: t0 }, t0 - 1)).toMatchObject({ log: true });
  });
  it('says once that it is gone, and nothing on a node that never warned', () => {
    expect(decideWarnings('', { warned: w, warnedAt: t0 }, t0 + 1)).toEqual({ log: false, cleared: true, memo: { warned: '', warnedAt: t0 + 1 } });
    expect(decideWarnings('', { warned: '', warnedAt: t0 }, t0 + 2)).toEqual({ log: false, cleared: false, memo: undefined });
    expect(decideWarnings('', {}, t0)).toEqual({ log: false, cleared: false, memo: undefined });
  });
});
