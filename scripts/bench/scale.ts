// The scale sections' shared pieces (gc, residue, plan): addresses by index, and the cost per 1000 and its growth.
import { fmtMs } from '../bench-lib.js';

export const ipOf = (base: number, i: number) => {
  const n = base + i;
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
};
export const GC_BASE = (10 << 24) + (128 << 16) + 2; // 10.128.0.2 …

/** Marginal cost per 1k units between consecutive sizes, and whether it stays within 1.5× of the first slope. */
export function slopes(points: Array<[number, number]>): { perK: string[]; linear: boolean | undefined; growth: number } {
  const perK: string[] = [''];
  const s: number[] = [];
  for (let i = 1; i < points.length; i++) {
    const [n0, t0] = points[i - 1]!;
    const [n1, t1] = points[i]!;
    s.push(((t1 - t0) / (n1 - n0)) * 1000);
    perK.push(fmtMs(s.at(-1)!));
  }
  const growth = s.length >= 2 ? s.at(-1)! / s[0]! : NaN;
  return { perK, linear: s.length >= 2 ? growth <= 1.5 : undefined, growth };
}
