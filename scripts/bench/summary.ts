// Targets, from whatever sections ran.
import { type Stats, fmtMiB, fmtMs, fmtRatio, heading, table } from '../bench-lib.js';
import { type Json, VARIANTS, ratio, results } from './context.js';
import { FLOOR } from './floor.js';
import type { slopes } from './scale.js';

export function summary(): void {
  heading('Targets');
  const rows: string[][] = [['target', 'wall', 'CPU', 'met (wall / CPU)']];
  const r = results as Json;
  const v = VARIANTS[0]!.name;
  const verdict = (...oks: Array<boolean | undefined>) => oks.map((ok) => (ok === undefined ? '–' : ok ? 'met' : 'NOT met')).join(' / ');
  const rt = (a: number, b: number) => `${fmtMs(a)} / ${fmtMs(b)} = ${ratio(a, b)}`;
  if (r.version) {
    const floor = r.version['node -e 0'];
    for (const form of ['SEA', 'node ipam-shim.js']) {
      const s = r.version[`${v} ${form} VERSION`];
      rows.push([
        `${form} VERSION ≤ 1.25× node -e 0 (issue 18)`,
        rt(s.wall.median, floor.wall.median),
        rt(s.cpu.median, floor.cpu.median),
        verdict(s.wall.median / floor.wall.median <= 1.25, s.cpu.n ? s.cpu.median / floor.cpu.median <= 1.25 : undefined),
      ]);
    }
  }
  if (r.status) {
    // Issue 24: STATUS against the embedded runtime's own `node -e 0` (section status names it by its version).
    const floorKey = Object.keys(r.status).find((k) => /^node v\d/.test(k)) ?? 'node -e 0';
    const floor = r.status[floorKey];
    for (const placement of ['IPAM slot', 'chained']) {
      const s = r.status[`${v} STATUS, ${placement}`];
      rows.push([
        `STATUS (${placement}) ≤ 1.25× ${floorKey} (issue 24)`,
        rt(s.wall.median, floor.wall.median),
        rt(s.cpu.median, floor.cpu.median),
        verdict(s.wall.median / floor.wall.median <= 1.25, s.cpu.n ? s.cpu.median / floor.cpu.median <= 1.25 : undefined),
      ]);
    }
  }
  // Issues 33 and 44: against the packaging floor, the empty single executable of the embedded runtime (CPU medians).
  const packaging = (name: string, limit: number, s: Json | undefined, floor: Json | undefined, minus?: Json) => {
    if (!s || !floor || !s.cpu.n) return;
    const own = s.cpu.median - (minus?.cpu.median ?? 0);
    rows.push([name, '', rt(own, floor.cpu.median), verdict(undefined, own / floor.cpu.median <= limit)]);
  };
  packaging(`SEA VERSION ≤ 1.1× ${FLOOR} (issue 44)`, 1.1, r.version?.[`${v} SEA VERSION`], r.version?.[FLOOR]);
  packaging(`STATUS (chained) ≤ 1.1× ${FLOOR} (issue 44)`, 1.1, r.status?.[`${v} STATUS, chained`], r.status?.[FLOOR]);
  packaging(
    `STATUS (IPAM slot) − host-local's ≤ 1.3× ${FLOOR} (issue 44)`,
    1.3,
    r.status?.[`${v} STATUS, IPAM slot`],
    r.status?.[FLOOR],
    r.status?.['host-local STATUS'],
  );
  // Issue 44: ADD and DEL no more than 3 ms of CPU dearer than the build named `before` (--variant before=…).
  if (r.addSlot && VARIANTS.some((x) => x.name === 'before'))
    for (const verb of ['add', 'del'] as const)
      for (const family of ['v4', 'dual']) {
        const now = r.addSlot[verb][`${v} SEA→host-local ${family}`];
        const before = r.addSlot[verb][`before SEA→host-local ${family}`];
        if (!now?.cpu.n || !before?.cpu.n) continue;
        rows.push([
          `${verb.toUpperCase()} ${family} (IPAM slot) ≤ before + 3 ms CPU (issue 44)`,
          '',
          `${fmtMs(now.cpu.median)} − ${fmtMs(before.cpu.median)} = ${fmtMs(now.cpu.median - before.cpu.median)} ms`,
          verdict(undefined, now.cpu.median - before.cpu.median <= 3),
        ]);
      }
  if (r.addSlot) {
    const floor = r.addSlot.add['node -e 0'];
    for (const family of ['v4', 'dual']) {
      const shim = r.addSlot.add[`${v} SEA→host-local ${family}`];
      const hl = r.addSlot.add[`host-local ${family}`];
      const ow = shim.wall.median - hl.wall.median;
      const oc = shim.cpu.median - hl.cpu.median;
      rows.push([
        `shim-only ADD overhead (${family}) ≤ 1.3× node -e 0`,
        rt(ow, floor.wall.median),
        rt(oc, floor.cpu.median),
        verdict(ow / floor.wall.median <= 1.3, shim.cpu.n ? oc / floor.cpu.median <= 1.3 : undefined),
      ]);
    }
  }
  if (r.addSlot) {
    // Issue 18: the shim's share of a pod's life in the slot, (shim ADD + DEL) − (host-local ADD + DEL), per Node start-up.
    const floor = r.addSlot.add['node -e 0'];
    for (const family of ['v4', 'dual']) {
      const [sa, sd] = [r.addSlot.add, r.addSlot.del].map((m) => m[`${v} SEA→host-local ${family}`]);
      const [ha, hd] = [r.addSlot.add, r.addSlot.del].map((m) => m[`host-local ${family}`]);
      const w = sa.wall.median + sd.wall.median - ha.wall.median - hd.wall.median;
      const c = sa.cpu.median + sd.cpu.median - ha.cpu.median - hd.cpu.median;
      rows.push([
        `ADD+DEL shim share (${family}) ≤ 1.5× 2 × node -e 0 (issue 18)`,
        rt(w, 2 * floor.wall.median),
        rt(c, 2 * floor.cpu.median),
        verdict(w / (2 * floor.wall.median) <= 1.5, sa.cpu.n ? c / (2 * floor.cpu.median) <= 1.5 : undefined),
      ]);
    }
  }
  if (r.chained) {
    const floor = r.chained.add['node -e 0'];
    const own = r.chained.shimPart[`ptp → ${v} SEA`];
    if (own)
      rows.push([
        'chained shim ADD ≤ 1.3× node -e 0',
        rt(own.add.median, floor.wall.median),
        rt(own.addCpu.median, floor.cpu.median),
        verdict(own.add.median / floor.wall.median <= 1.3, own.addCpu.n ? own.addCpu.median / floor.cpu.median <= 1.3 : undefined),
      ]);
  }
  if (r.rss) {
    const shimCases = Object.entries(r.rss as Record<string, Stats>).filter(([k]) => k.startsWith(`${v} `));
    const worst = Math.max(...shimCases.map(([, s]) => s.max));
    rows.push([
      'peak RSS of one invocation < 60 MiB',
      `worst ${fmtMiB(worst)} MiB (${shimCases.map(([k, s]) => `${k.slice(v.length + 1)} ${fmtMiB(s.median)}`).join(', ')})`,
      '',
      verdict(worst < 60 * 1024),
    ]);
  }
  if (r.gc) {
    const sizes = Object.keys(r.gc)
      .map(Number)
      .sort((a, b) => a - b);
    const at = r.gc[5000] ? 5000 : sizes.at(-1)!;
    const g = r.gc[at];
    rows.push([
      `GC of ${at} < 2× (one ADD + its ${g.dels} delegate DELs)`,
      `${fmtMs(g.gc.median)} / ${fmtMs(g.floor)} = ${ratio(g.gc.median, g.floor)}`,
      fmtRatio(g.ratioCpu),
      verdict(g.ratio < 2, Number.isFinite(g.ratioCpu) ? g.ratioCpu < 2 : undefined),
    ]);
    const peak = Math.max(...sizes.map((n) => r.gc[n].rssKiB.max));
    rows.push([
      `GC peak RSS (${sizes.join('/')})`,
      `${sizes.map((n) => `${n}: ${fmtMiB(r.gc[n].rssKiB.median)}`).join(', ')} MiB`,
      '',
      peak < 60 * 1024 ? 'under 60 MiB' : 'over 60 MiB',
    ]);
  }
  const lin = (name: string, l: { wall: ReturnType<typeof slopes>; cpu: ReturnType<typeof slopes> } | undefined) => {
    if (!l || l.wall.linear === undefined) return;
    rows.push([
      `${name} linear (last marginal cost ≤ 1.5× the first)`,
      `×${l.wall.growth.toFixed(2)}`,
      `×${l.cpu.growth.toFixed(2)}`,
      verdict(l.wall.linear, l.cpu.linear),
    ]);
  };
  lin('GC', r.gcLinear);
  lin('residue cleanup', r.residueLinear);
  lin('plan', r.planLinear);
  console.log(table(rows));
}
