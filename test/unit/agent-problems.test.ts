// The agent's persisting problems (src/agent/problems.ts): one line when a problem starts, debug while it lasts,
// one when it clears; a different problem of the same step is a new one.
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { PersistingProblems } from '../../src/agent/problems.js';
import { CniError, ErrorCode } from '../../src/cni/errors.js';

function capture() {
  const lines: Record<string, any>[] = [];
  const log = pino(
    { level: 'debug', formatters: { level: (label: string) => ({ level: label }) } },
    { write: (l: string) => void lines.push(JSON.parse(l)) },
  );
  return { log, lines };
}

describe('PersistingProblems', () => {
  it('logs a problem once when it starts (error, no stack for a CniError), at debug while it lasts, once when it clears', () => {
    const { log, lines } = capture();
    const p = new PersistingProblems();
    const missing = () => new CniError(ErrorCode.InvalidNetworkConfig, 'no conflist with ipam-shim found in /etc/cni/net.d');
    for (let i = 0; i < 5; i++) p.failed('network', missing(), log);
    expect(lines.filter((l) => l.level === 'error')).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      step: 'network',
      error: { code: ErrorCode.InvalidNetworkConfig, msg: 'no conflist with ipam-shim found in /etc/cni/net.d' },
    });
    expect(JSON.stringify(lines)).not.toContain('stack');
    expect(lines.filter((l) => l.level === 'debug')).toHaveLength(4);
    expect(p.current()).toMatchObject([{ step: 'network', passes: 5 }]);
    p.succeeded('network', log);
    p.succeeded('network', log);
    expect(lines.filter((l) => l.msg === 'network: recovered')).toMatchObject([{ level: 'info', passes: 5 }]);
    expect(p.current()).toEqual([]);
  });

  it('a different problem of the same step, or another step, is logged as new', () => {
    const { log, lines } = capture();
    const p = new PersistingProblems();
    p.failed('gc', new CniError(ErrorCode.LedgerCorrupt, 'ledger unreadable'), log);
    p.failed('gc', new Error('EMFILE'), log);
    p.failed('residue', new Error('EMFILE'), log);
    expect(lines.filter((l) => l.level === 'error').map((l) => l.step)).toEqual(['gc', 'gc', 'residue']);
  });
});
