// The shape every operator command has: parse argv, do the work through the same modules the verbs use,
// return data + a human rendering. Commands never print or exit; src/cli/index.ts does, once.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Run } from '../effects/exec.js';

interface CommandContext {
  /** How to run programs (tests may point it at a network namespace). */
  run: Run;
  env: NodeJS.ProcessEnv;
}

/**
 * Every command's exit status (docs/cli.md): what a script can branch on without reading the output. A command
 * that throws (anything but a UsageError) could not run: src/cli/index.ts maps it to COULD_NOT_RUN.
 */
export const Exit = { OK: 0, FOUND: 1, USAGE: 2, COULD_NOT_RUN: 3 } as const;

export interface CommandOutput {
  /** What `--json` prints. */
  data: unknown;
  /** What a human sees. */
  text: string;
  /** Exit.OK, or Exit.FOUND when the command found a problem (Exit.USAGE and COULD_NOT_RUN come from throwing). */
  exitCode: number;
}

/** One flag in `--help`: its value's placeholder (none for a boolean) and what it does, defaults and an example value included. */
interface FlagHelp {
  value?: string;
  text: string;
}

export interface Command {
  name: string;
  /** One line: what `ipam-shim --help` lists beside the name. */
  summary: string;
  usage: string;
  /** The parseArgs options run() accepts: `--help` lists each of them, described by `flagHelp` (a unit test holds them equal). */
  options: NonNullable<ParseArgsConfig['options']>;
  flagHelp: Record<string, FlagHelp>;
  /** Whole command lines an operator can copy (at least one). */
  examples: string[];
  /** What each exit status means for this command (`--help` prints it). */
  exitStatus: string;
  /** false: the command has no `--json` (the agent: its output is its log lines); --help does not offer it, index.ts refuses it. */
  json?: false;
  run(argv: string[], ctx: CommandContext): Promise<CommandOutput>;
}

/** `--json`, which every command takes (src/cli/index.ts reads it). */
const JSON_FLAG: FlagHelp = { text: 'print the result as one JSON document instead of text' };

/** `ipam-shim <command> --help` and `ipam-shim help <command>`: summary, usage, each flag, examples, exit status. */
export function commandHelp(c: Command): string {
  const flags = Object.keys(c.options).map((name) => {
    const h = c.flagHelp[name];
    return [`--${name}${h?.value ? ` ${h.value}` : ''}`, h?.text ?? ''] as const;
  });
  if (c.json !== false) flags.push(['--json', JSON_FLAG.text]);
  const width = Math.max(...flags.map(([f]) => f.length));
  const lines = [
    c.summary,
    '',
    c.usage,
    '',
    'flags:',
    ...flags.map(([f, t]) => `  ${f.padEnd(width)}  ${t}`),
    '',
    'examples:',
    ...c.examples.map((e) => `  ${e}`),
    '',
    `exit status: ${c.exitStatus}`,
  ];
  return `${lines.join('\n')}\n`;
}

/** A usage mistake: index.ts prints it with the command's usage and exits 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The command looked and found a problem it cannot go past (e.g. nothing to print): index.ts exits 1 with it. */
export class ProblemFound extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProblemFound';
  }
}

/** Runs fn; whatever it throws becomes a usage mistake (exit 2). */
export function asUsage<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

/** node:util's parseArgs, with an unknown flag or a bad value as a UsageError. */
export function parseArgv<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  return asUsage(() => parseArgs(config));
}
