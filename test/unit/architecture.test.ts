// docs/architecture.md against the tree: its drawing of the layers names every folder and top-level file of src/ on
// one floor, and every import of src/ (static or on demand) runs from a floor to a lower one (or stays in its unit);
// the list of fixes' registry is the only module outside the fix folders that imports one.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const SRC = join(ROOT, 'src');

/** The drawing's floors, top first: each line's units (`name/`, `name.ts`), text in parentheses left out. */
function floors(): string[][] {
  const md = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');
  const start = md.indexOf('## The layers');
  const block = /```\n([\s\S]*?)```/.exec(md.slice(start))![1]!;
  return block
    .split('\n')
    .map((line) => [...line.replace(/\([^)]*\)/g, '').matchAll(/[a-z][a-z-]*(?:\/|\.ts\b)/g)].map((m) => m[0]))
    .filter((units) => units.length > 0);
}

/** src/'s units: its folders (`name/`) and top-level files (`name.ts`). */
const units = (): string[] => readdirSync(SRC).map((n) => (statSync(join(SRC, n)).isDirectory() ? `${n}/` : n));

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Every import of ours in src/: from file, to file (both relative to src/), static or `import()`. */
function imports(): Array<{ from: string; to: string }> {
  return files(SRC).flatMap((file) => {
    const text = readFileSync(file, 'utf8');
    return [...text.matchAll(/(?:from|import\()\s*'(\.[^']+)'/g)].map((m) => ({
      from: relative(SRC, file),
      to: relative(SRC, resolve(file, '..', m[1]!.replace(/\.js$/, '.ts'))),
    }));
  });
}

const unitOf = (path: string): string => (path.includes('/') ? `${path.split('/')[0]}/` : path);

/** The fix folders, as the layer rules read them: every folder the registry imports but the contract. */
const FIX_FOLDERS = [...readFileSync(join(SRC, 'fix-list/registry.ts'), 'utf8').matchAll(/from '\.\.\/([^/']+)\//g)]
  .map((m) => `${m[1]}/`)
  .filter((f) => f !== 'contract/');

describe("docs/architecture.md's drawing of the layers", () => {
  it('names every folder and top-level file of src/ once, and nothing else (a fix folder may stand for itself)', () => {
    const drawn = floors().flat();
    expect(drawn.filter((u, i) => drawn.indexOf(u) !== i)).toEqual([]);
    expect(drawn.filter((u) => !units().includes(u))).toEqual([]);
    expect(units().filter((u) => !drawn.includes(u) && !FIX_FOLDERS.includes(u))).toEqual([]);
  });

  it('every import runs down a floor (or stays in its unit): no arrow up, none across a floor', () => {
    const lines = floors();
    const floorOf = new Map(lines.flatMap((line, i) => line.map((u) => [u, lines.length - i] as const)));
    // A fix folder the drawing does not name (a new one: the registry is its one line) is on the fix folders' floor.
    const fixFloor = floorOf.get(FIX_FOLDERS.find((f) => floorOf.has(f))!)!;
    for (const f of FIX_FOLDERS) if (!floorOf.has(f)) floorOf.set(f, fixFloor);
    const wrong = imports()
      .filter(({ from, to }) => unitOf(from) !== unitOf(to))
      .filter(({ from, to }) => floorOf.get(unitOf(from))! <= floorOf.get(unitOf(to))!)
      .map(({ from, to }) => `${from} -> ${to}`);
    expect(wrong).toEqual([]);
  });

  it("the registry is the only module outside the fix folders that imports one (the doc's sentence)", () => {
    expect(FIX_FOLDERS.length).toBeGreaterThanOrEqual(4);
    const outside = imports()
      .filter(({ from, to }) => FIX_FOLDERS.includes(unitOf(to)) && !FIX_FOLDERS.includes(unitOf(from)))
      .map(({ from }) => from);
    expect([...new Set(outside)]).toEqual(['fix-list/registry.ts']);
  });
});
