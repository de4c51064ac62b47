// The metrics file's pure parts: one invocation applied to the series, and the text format both ways.
import { describe, expect, it } from 'vitest';
import { applyUpdate, parseMetrics, renderMetrics, seriesKey, type Update } from '../../src/metrics.js';
import { ErrorCode } from '../../src/cni/errors.js';

const base: Update = {
  network: 'cilium',
  verb: 'ADD',
  code: 0,
  counts: { residueRules: 0, residueNeighbours: 0, gcReleased: 0 },
  ledger: { attachments: 3, agentIps: 1 },
  nowSeconds: 1700000000.7,
};
const value = (text: string, name: string, labels: Record<string, string>) => parseMetrics(text).get(seriesKey(name, labels))?.value;

describe('applyUpdate', () => {
  it('counts an invocation, sets gauges, and creates zero counters so rate() starts at 0', () => {
    const text = renderMetrics(applyUpdate(new Map(), base));
    expect(value(text, 'ipam_shim_invocations_total', { network: 'cilium', verb: 'ADD' })).toBe(1);
    expect(value(text, 'ipam_shim_reserved_refusals_total', { network: 'cilium' })).toBe(0);
    expect(value(text, 'ipam_shim_residue_removed_total', { network: 'cilium', kind: 'neigh' })).toBe(0);
    expect(value(text, 'ipam_shim_ledger_attachments', { network: 'cilium' })).toBe(3);
    expect(value(text, 'ipam_shim_agent_ips', { network: 'cilium' })).toBe(1);
    expect(value(text, 'ipam_shim_last_invocation_timestamp_seconds', { network: 'cilium', verb: 'ADD' })).toBe(1700000000);
    // Every recorded verb's every CNI error code at 0 from the first call: the first failure with a code is an
    // increase() from 0 (a series born at 1 raised no alert).
    for (const verb of ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS'])
      for (const code of Object.values(ErrorCode))
        expect(value(text, 'ipam_shim_errors_total', { network: 'cilium', verb, code: String(code) }), `${verb} ${code}`).toBe(0);
    expect(text.match(/^ipam_shim_errors_total\{/gm)).toHaveLength(5 * Object.values(ErrorCode).length);
  });

  it('errors by verb and code; refusals only for ADD with 100; residue and GC add their counts', () => {
    let m = applyUpdate(new Map(), { ...base, code: ErrorCode.ReservedAddress });
    m = applyUpdate(m, { ...base, verb: 'CHECK', code: ErrorCode.ReservedAddress });
    m = applyUpdate(m, { ...base, counts: { residueRules: 2, residueNeighbours: 1 } });
    m = applyUpdate(m, { ...base, verb: 'GC', counts: { gcReleased: 4 } });
    const text = renderMetrics(m);
    expect(value(text, 'ipam_shim_errors_total', { network: 'cilium', verb: 'ADD', code: '100' })).toBe(1);
    expect(value(text, 'ipam_shim_errors_total', { network: 'cilium', verb: 'CHECK', code: '100' })).toBe(1);
    expect(value(text, 'ipam_shim_reserved_refusals_total', { network: 'cilium' })).toBe(1);
    expect(value(text, 'ipam_shim_residue_removed_total', { network: 'cilium', kind: 'ebtables' })).toBe(2);
    expect(value(text, 'ipam_shim_residue_removed_total', { network: 'cilium', kind: 'neigh' })).toBe(1);
    expect(value(text, 'ipam_shim_gc_released_total', { network: 'cilium' })).toBe(4);
    expect(value(text, 'ipam_shim_invocations_total', { network: 'cilium', verb: 'ADD' })).toBe(2);
  });

  it('observes the call duration in a cumulative histogram by verb: buckets by le, then _sum and _count', () => {
    let m = applyUpdate(new Map(), { ...base, durationSeconds: 0.12 });
    m = applyUpdate(m, { ...base, durationSeconds: 0.04 });
    m = applyUpdate(m, { ...base, verb: 'DEL', durationSeconds: 45 });
    const text = renderMetrics(m);
    const h = 'ipam_shim_cni_call_duration_seconds';
    const add = { network: 'cilium', verb: 'ADD' };
    expect(value(text, `${h}_bucket`, { ...add, le: '0.025' })).toBe(0);
    expect(value(text, `${h}_bucket`, { ...add, le: '0.05' })).toBe(1);
    expect(value(text, `${h}_bucket`, { ...add, le: '0.1' })).toBe(1);
    expect(value(text, `${h}_bucket`, { ...add, le: '0.25' })).toBe(2);
    expect(value(text, `${h}_bucket`, { ...add, le: '+Inf' })).toBe(2);
    expect(value(text, `${h}_sum`, add)).toBeCloseTo(0.16, 10);
    expect(value(text, `${h}_count`, add)).toBe(2);
    expect(value(text, `${h}_bucket`, { network: 'cilium', verb: 'DEL', le: '30' })).toBe(0);
    expect(value(text, `${h}_bucket`, { network: 'cilium', verb: 'DEL', le: '+Inf' })).toBe(1);
    // One family block; each label set's buckets ascending by le, then its _sum and _count.
    expect(text.match(/^# TYPE ipam_shim_cni_call_duration_seconds histogram$/gm)).toHaveLength(1);
    const rows = text.split('\n').filter((l) => l.startsWith(h) && l.includes('verb="ADD"'));
    expect(rows.map((l) => /le="([^"]+)"/.exec(l)?.[1] ?? l.slice(h.length).split('{')[0])).toEqual([
      '0.025',
      '0.05',
      '0.1',
      '0.25',
      '0.5',
      '1',
      '2.5',
      '5',
      '10',
      '30',
      '+Inf',
      '_sum',
      '_count',
    ]);
    expect(renderMetrics(parseMetrics(text))).toBe(text);
  });

  it('observes no duration when the call did not give one', () => {
    expect(renderMetrics(applyUpdate(new Map(), base))).not.toContain('ipam_shim_cni_call_duration_seconds');
  });

  it('keeps the gauges when the ledger could not be read', () => {
    const m = applyUpdate(new Map(), base);
    const { ledger: _drop, ...noLedger } = base;
    const text = renderMetrics(applyUpdate(m, noLedger));
    expect(value(text, 'ipam_shim_ledger_attachments', { network: 'cilium' })).toBe(3);
  });
});

describe('text format', () => {
  it('round-trips, with HELP/TYPE once per family and escaped label values', () => {
    const m = applyUpdate(applyUpdate(new Map(), base), { ...base, network: 'we"ird\\net\nx' });
    const text = renderMetrics(m);
    expect(parseMetrics(text)).toEqual(m);
    expect(text.match(/^# TYPE ipam_shim_invocations_total counter$/gm)).toHaveLength(1);
    expect(text).toContain('network="we\\"ird\\\\net\\nx"');
    expect(renderMetrics(parseMetrics(text))).toBe(text);
  });

  it('drops comments, garbage and families it does not own', () => {
    const m = parseMetrics(
      '# HELP x y\nnot a metric line\nother_metric{a="b"} 5\nipam_shim_gc_released_total{network="n"} 2\nipam_shim_gc_released_total{network="m"} NaN\n',
    );
    expect([...m.keys()]).toEqual(['other_metric{a="b"}', 'ipam_shim_gc_released_total{network="n"}']);
    expect(renderMetrics(m)).not.toContain('other_metric');
  });
});
