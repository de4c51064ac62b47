// What reaches an operator's terminal (src/terminal.ts): values from outside are one line with every control
// character escaped; a whole output keeps its own newlines and tabs, and a JSON document stays the same JSON.
import { describe, expect, it } from 'vitest';
import { forTerminal, shown } from '../../src/terminal.js';
import { rawControls } from '../support/shim/terminal.js';

const HOSTILE = 'web\u001b[2J\u0007-0\nshop/x\tz\r\u0000\u007f\u0085\u009b31m\u2028\u2029\u202eexe.txt\u2066\u200f\u061c';

describe('shown', () => {
  it('escapes C0 (newline and tab included), DEL, C1, the line separators and the bidi controls; leaves the rest', () => {
    expect(shown('web\u001b[2J\u0007-0')).toBe('web\\x1b[2J\\x07-0');
    expect(shown('a\nb\tc\rd\u0000')).toBe('a\\x0ab\\x09c\\x0dd\\x00');
    expect(shown('\u007f\u0085\u009b\u2028\u2029\u202a\u202e\u2066\u2069\u200e\u200f\u061c')).toBe(
      '\\u007f\\u0085\\u009b\\u2028\\u2029\\u202a\\u202e\\u2066\\u2069\\u200e\\u200f\\u061c',
    );
    const plain = 'kube-system/coredns-5d78c9869d-abcde 10.224.1.7 fd00::7 /etc/cni/net.d/05-cilium.conflist … → ≥ é 日本';
    expect(shown(plain)).toBe(plain);
    expect(rawControls(shown(HOSTILE), '')).toEqual([]);
    expect(shown(HOSTILE).split('\n')).toHaveLength(1);
  });
});

describe('forTerminal', () => {
  it("keeps the output's own newlines and tabs, escapes every other control character", () => {
    const out = forTerminal(`head\n\trow ${HOSTILE}\n`);
    expect(out.startsWith('head\n\trow web\\x1b[2J\\x07-0\nshop/x\tz\\x0d')).toBe(true);
    expect(rawControls(out, '\n\t')).toEqual([]);
  });

  it('a JSON document passed through is still JSON, of the same value, with no raw control character', () => {
    const value = { pod: { name: HOSTILE, namespace: 'ns\u009b' }, list: [HOSTILE] };
    const json = JSON.stringify(value, null, 2);
    expect(rawControls(json)).not.toEqual([]); // JSON.stringify leaves DEL, C1 and the separators raw
    const out = forTerminal(json);
    expect(rawControls(out)).toEqual([]);
    expect(JSON.parse(out)).toEqual(value);
  });
});
