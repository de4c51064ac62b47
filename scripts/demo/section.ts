// What every demo section gets: a way to narrate and to show commands and their output, uniformly.
import { execa } from 'execa';

export interface Demo {
  /** A heading for a new part of the story. */
  title(text: string): void;
  /** A sentence of narration. */
  say(text: string): void;
  /** Runs a command, prints it and (trimmed) its output; never throws. */
  show(
    file: string,
    args: string[],
    opts?: { input?: string; env?: Record<string, string>; maxLines?: number },
  ): Promise<{ exitCode: number; stdout: string; stderr: string }>;
  /** Records a verdict line ("✔ …" / "✘ …"); a ✘ makes the demo exit non-zero at the end. */
  verdict(ok: boolean, text: string): void;
}

export interface DemoSection {
  name: string;
  run(d: Demo): Promise<void>;
}

export function createDemo(): Demo & { failures: number } {
  const d = {
    failures: 0,
    title(text: string) {
      process.stdout.write(`\n\x1b[1m== ${text} ==\x1b[0m\n`);
    },
    say(text: string) {
      process.stdout.write(`${text}\n`);
    },
    async show(file: string, args: string[], opts: { input?: string; env?: Record<string, string>; maxLines?: number } = {}) {
      process.stdout.write(`\x1b[2m$ ${[file, ...args].join(' ')}\x1b[0m\n`);
      const r = await execa(file, args, { input: opts.input ?? '', env: opts.env, reject: false, all: true });
      const lines = String(r.all ?? '')
        .trimEnd()
        .split('\n');
      const max = opts.maxLines ?? 20;
      const shown = lines.length > max ? [...lines.slice(0, max), `… (${lines.length - max} more lines)`] : lines;
      if (shown.join('') !== '') process.stdout.write(`${shown.map((l) => `  ${l}`).join('\n')}\n`);
      return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? '') };
    },
    verdict(ok: boolean, text: string) {
      if (!ok) d.failures++;
      process.stdout.write(`${ok ? '\x1b[32m✔' : '\x1b[31m✘'} ${text}\x1b[0m\n`);
    },
  };
  return d;
}
