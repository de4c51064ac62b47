// The node-life runner's bookkeeping: timed phases, a timeline of events, invariants (each PASS/FAIL with its
// evidence), and the one-page text report and JSON file they make.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

export interface Phase {
  name: string;
  startMs: number;
  endMs?: number;
  /** What the phase measured (counts, timings). */
  notes: Record<string, unknown>;
}

export interface Invariant {
  name: string;
  /** What it promises, in one line. */
  what: string;
  checks: number;
  violations: string[];
  /** Numbers and facts that back the verdict. */
  evidence: Record<string, unknown>;
  /** Set when the invariant could not be evaluated (never read as PASS). */
  notEvaluated?: string;
}

export interface TimelineEvent {
  t: number;
  kind: string;
  detail?: string;
}

const MAX_VIOLATIONS = 20;

export class LifeRecord {
  readonly t0 = Date.now();
  readonly phases: Phase[] = [];
  readonly events: TimelineEvent[] = [];
  readonly invariants = new Map<string, Invariant>();
  readonly counts: Record<string, number> = {};
  readonly samples: Array<{ t: number; live: number; ready: boolean | undefined; held: number }> = [];

  /** `progress` sees every event as it happens (a long life's log; where a stuck one stopped). */
  constructor(private readonly progress?: (line: string) => void) {}

  now(): number {
    return Date.now() - this.t0;
  }

  event(kind: string, detail?: string): void {
    this.events.push({ t: this.now(), kind, ...(detail ? { detail } : {}) });
    if (kind !== 'pod') this.progress?.(`life +${(this.now() / 1000).toFixed(1)}s ${kind}: ${detail ?? ''}`);
  }

  count(name: string, by = 1): void {
    this.counts[name] = (this.counts[name] ?? 0) + by;
  }

  /** Runs a timed phase; one that takes longer than `budgetMs` fails the life (a stuck step names itself). */
  async phase<T>(name: string, fn: (p: Phase) => Promise<T>, budgetMs = 600_000): Promise<T> {
    const p: Phase = { name, startMs: this.now(), notes: {} };
    this.phases.push(p);
    this.event('phase', `${name} start`);
    let timer: NodeJS.Timeout | undefined;
    try {
      const overrun = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`phase ${name} took longer than ${budgetMs} ms (notes: ${JSON.stringify(p.notes)})`)), budgetMs);
      });
      return await Promise.race([fn(p), overrun]);
    } finally {
      clearTimeout(timer);
      p.endMs = this.now();
      this.event('phase', `${name} end (${p.endMs - p.startMs} ms)`);
    }
  }

  invariant(name: string, what: string): Invariant {
    let inv = this.invariants.get(name);
    if (!inv) {
      inv = { name, what, checks: 0, violations: [], evidence: {} };
      this.invariants.set(name, inv);
    }
    return inv;
  }

  /** One check of `name`: `violation` undefined passes. */
  check(name: string, what: string, violation?: string): void {
    const inv = this.invariant(name, what);
    inv.checks++;
    if (violation) {
      if (inv.violations.length < MAX_VIOLATIONS) inv.violations.push(`t=${(this.now() / 1000).toFixed(1)}s ${violation}`);
      else inv.evidence.moreViolations = Number(inv.evidence.moreViolations ?? 0) + 1;
    }
  }

  passed(inv: Invariant): boolean {
    return !inv.notEvaluated && inv.checks > 0 && inv.violations.length === 0;
  }

  failures(): Invariant[] {
    return [...this.invariants.values()].filter((i) => !this.passed(i));
  }

  json(meta: Record<string, unknown>): Record<string, unknown> {
    return {
      ...meta,
      durationMs: this.now(),
      phases: this.phases.map((p) => ({ ...p, ms: (p.endMs ?? this.now()) - p.startMs })),
      counts: this.counts,
      invariants: [...this.invariants.values()].map((i) => ({ ...i, verdict: this.passed(i) ? 'PASS' : 'FAIL' })),
      events: this.events,
      samples: this.samples,
    };
  }

  /** The one-page report. */
  text(meta: Record<string, unknown>): string {
    const lines = [`ipam-shim node life: ${JSON.stringify(meta)}`, `total ${(this.now() / 1000).toFixed(1)} s`, '', 'PHASES'];
    for (const p of this.phases) {
      const notes = Object.entries(p.notes)
        .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
        .join(' ');
      lines.push(`  ${p.name.padEnd(11)} ${(((p.endMs ?? this.now()) - p.startMs) / 1000).toFixed(1).padStart(6)} s  ${notes}`);
    }
    lines.push(
      '',
      `COUNTS ${Object.entries(this.counts)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
      '',
      'INVARIANTS',
    );
    for (const i of this.invariants.values()) {
      const verdict = i.notEvaluated ? 'FAIL (not evaluated)' : this.passed(i) ? 'PASS' : 'FAIL';
      lines.push(`  ${verdict.padEnd(4)} ${i.name}: ${i.what} (${i.checks} checks)`);
      if (Object.keys(i.evidence).length) lines.push(`       evidence: ${JSON.stringify(i.evidence)}`);
      if (i.notEvaluated) lines.push(`       ${i.notEvaluated}`);
      for (const v of i.violations.slice(0, 5)) lines.push(`       ! ${v}`);
      if (i.violations.length > 5) lines.push(`       … ${i.violations.length - 5} more (JSON)`);
    }
    return `${lines.join('\n')}\n`;
  }

  /** A timeline picture: live pods and addresses held over time, NotReady spans, and the events as ticks. */
  svg(): string {
    const W = 1000;
    const H = 220;
    const end = Math.max(1, this.now());
    const x = (t: number) => ((t / end) * (W - 40) + 30).toFixed(1);
    const maxY = Math.max(1, ...this.samples.map((s) => Math.max(s.live, s.held)));
    const y = (v: number) => (H - 30 - (v / maxY) * (H - 60)).toFixed(1);
    const line = (key: 'live' | 'held', color: string) =>
      `<polyline fill="none" stroke="${color}" points="${this.samples.map((s) => `${x(s.t)},${y(s[key])}`).join(' ')}"/>`;
    const notReady = this.samples
      .filter((s) => s.ready === false)
      .map((s) => `<rect x="${x(s.t)}" y="20" width="3" height="${H - 50}" fill="#f99" opacity="0.4"/>`)
      .join('');
    const ticks = this.events
      .filter((e) => e.kind !== 'pod')
      .map(
        (e) =>
          `<line x1="${x(e.t)}" x2="${x(e.t)}" y1="${H - 28}" y2="${H - 18}" stroke="#555"><title>${escapeXml(`${e.kind}: ${e.detail ?? ''}`)}</title></line>`,
      )
      .join('');
    const phases = this.phases
      .map(
        (p) =>
          `<text x="${x(p.startMs)}" y="14" font-size="10">${escapeXml(p.name)}</text><line x1="${x(p.startMs)}" x2="${x(p.startMs)}" y1="16" y2="${H - 30}" stroke="#ccc"/>`,
      )
      .join('');
    return [
      `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif">`,
      phases,
      notReady,
      line('live', '#06c'),
      line('held', '#c60'),
      ticks,
      `<text x="30" y="${H - 4}" font-size="10">blue: live pods; orange: addresses host-local holds; red: NotReady; ticks: events (hover); ${(end / 1000).toFixed(0)} s</text>`,
      '</svg>',
    ].join('\n');
  }

  async write(dir: string, meta: Record<string, unknown>): Promise<{ text: string; jsonPath: string; textPath: string }> {
    await mkdir(dir, { recursive: true });
    const text = this.text(meta);
    const jsonPath = path.join(dir, 'life-report.json');
    const textPath = path.join(dir, 'life-report.txt');
    await writeFile(jsonPath, `${JSON.stringify(this.json(meta), null, 2)}\n`);
    await writeFile(textPath, text);
    await writeFile(path.join(dir, 'life-timeline.svg'), this.svg());
    return { text, jsonPath, textPath };
  }
}

function escapeXml(s: string): string {
  return s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}

/** p-quantile of `xs` (nearest rank). */
export function quantile(xs: number[], p: number): number {
  if (!xs.length) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]!;
}
