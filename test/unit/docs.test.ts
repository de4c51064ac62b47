// The operator docs against the code: the configuration reference against ShimSettingsSchema (every key, no
// extra ones, the defaults as the schema applies them), the CLI reference against `--help` output, the error
// catalogue against ErrorCode, and every command the docs tell an operator to run exists.
import { describe, expect, it } from 'vitest';
import { readFile, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ShimSettingsSchema } from '../../src/cni/config.js';
import { ErrorCode } from '../../src/cni/errors.js';
import { runCli } from '../../src/cli/index.js';

const ROOT = resolve(import.meta.dirname, '../..');
const doc = (name: string) => readFile(join(ROOT, 'docs', name), 'utf8');
const OUR_DOCS = ['configuration.md', 'cli.md', 'operations.md', 'errors.md'];

/** The lines between a heading and the next heading of the same or a higher level. */
function section(md: string, heading: string): string {
  const lines = md.split('\n');
  const start = lines.indexOf(heading);
  expect(start, `heading "${heading}"`).toBeGreaterThanOrEqual(0);
  const level = /^#+/.exec(heading)![0].length;
  const end = lines.findIndex((l, i) => i > start && /^#+ /.test(l) && /^#+/.exec(l)![0].length <= level);
  return lines.slice(start + 1, end < 0 ? undefined : end).join('\n');
}

async function commands(): Promise<string[]> {
  const top = (await runCli(['--help'], {})).stdout;
  return top
    .slice(top.indexOf('commands:\n') + 'commands:\n'.length)
    .split('\n\n')[0]!
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0]!)
    .filter(Boolean);
}

describe('docs/configuration.md', () => {
  it("documents every setting of ShimSettingsSchema, and nothing else, with the schema's defaults", async () => {
    const rows = section(await doc('configuration.md'), '## Settings')
      .split('\n')
      .filter((l) => l.startsWith('| `'))
      .map((l) => l.split(' | ').map((c) => c.replace(/^\| ?/, '').trim()));
    const keys = rows.map((r) => /^`([^`]+)`$/.exec(r[0]!)?.[1]);
    expect(keys.sort()).toEqual(Object.keys(ShimSettingsSchema.shape).sort());
    const defaults = ShimSettingsSchema.parse({}) as Record<string, unknown>;
    for (const [key, def, meaning] of rows.map((r) => [/`([^`]+)`/.exec(r[0]!)![1]!, r[1]!, r[2]!] as const)) {
      expect(meaning.length, `meaning of ${key}`).toBeGreaterThan(20);
      if (defaults[key] === undefined) {
        expect(def, `${key} has no default in the schema`).toMatch(/^none\b/);
        continue;
      }
      const shown = /`([^`]+)`/.exec(def)?.[1];
      expect(shown, `default of ${key}`).toBeDefined();
      let value: unknown = shown;
      try {
        value = JSON.parse(shown!);
      } catch {
        // a bare string such as info or /var/log/ipam-shim.log
      }
      expect(value, `default of ${key}`).toEqual(defaults[key]);
    }
  });
});

describe('docs/cli.md', () => {
  it('holds `ipam-shim --help` verbatim', async () => {
    const top = (await runCli(['--help'], {})).stdout;
    expect(await doc('cli.md')).toContain(`\`\`\`\n${top}\`\`\``);
  });

  it('has one section per command, each holding `ipam-shim <cmd> --help` verbatim and its exit status', async () => {
    const md = await doc('cli.md');
    const names = await commands();
    expect(names.length).toBeGreaterThan(0);
    const headings = [...md.matchAll(/^## `ipam-shim ([a-z-]+)`$/gm)].map((m) => m[1]);
    expect(headings).toEqual(names);
    for (const name of names) {
      const help = await runCli([name, '--help'], {});
      expect(help.exitCode).toBe(0);
      expect(help.stdout, `${name} --help lists its exit codes`).toMatch(/^exit status: .*\b0\b.*\b1\b.*\b2\b.*$/m);
      const body = section(md, `## \`ipam-shim ${name}\``);
      expect(body, `docs/cli.md section for ${name} must contain its --help output`).toContain(`\`\`\`\n${help.stdout}\`\`\``);
      expect(body).toMatch(/^Exit status: .*0.*/m);
    }
  });
});

describe('docs/errors.md', () => {
  it('explains every code in ErrorCode, each with what to do, and delegate passthrough', async () => {
    const md = await doc('errors.md');
    const documented = [...md.matchAll(/^### (\d+) — .+$/gm)].map((m) => Number(m[1]));
    expect([...documented].sort((a, b) => a - b)).toEqual([...new Set(Object.values(ErrorCode))].sort((a, b) => a - b));
    for (const code of documented) expect(section(md, md.split('\n').find((l) => l.startsWith(`### ${code} — `))!)).toContain('**What to do:**');
    expect(section(md, '## Delegate errors (passthrough)')).toContain('unchanged');
  });
});

describe('operator docs', () => {
  it('only tell operators to run commands that exist', async () => {
    // `help` is the CLI's own (ipam-shim help <command>), not a command.
    const names = new Set([...(await commands()), 'help']);
    for (const file of OUR_DOCS) {
      const md = await doc(file);
      // Command lines in code blocks (optionally after sudo or a path) and inline code that starts with ipam-shim.
      const blocks = [...md.matchAll(/```[a-z]*\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split('\n'));
      const spans = [...md.matchAll(/`(ipam-shim [^`\n]+)`/g)].map((m) => m[1]!);
      for (const line of [...blocks, ...spans]) {
        const m = /^(?:sudo\s+)?(?:"?\S*\/)?ipam-shim"?\s+([a-z][a-z-]*)/.exec(line.trim());
        if (!m) continue;
        expect(names, `${file}: "ipam-shim ${m[1]}"`).toContain(m[1]);
      }
    }
  });

  it('link only to files that exist', async () => {
    for (const file of OUR_DOCS) {
      const md = await doc(file);
      for (const m of md.matchAll(/\]\((?!https?:)([^)#]+)(#[^)]*)?\)/g)) {
        await expect(stat(resolve(ROOT, 'docs', m[1]!)), `${file} → ${m[1]}`).resolves.toBeDefined();
      }
    }
  });
});
