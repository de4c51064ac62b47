// The shape every operator command has: parse argv, do the work through the same modules the verbs use,
// return data + a human rendering. Commands never print or exit; src/cli/index.ts does, once.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Run } from '../effects/exec.js';

interface CommandContext {
  /** How to run programs (tests may point it at a network namespace). */
  run: Run;
  env: NodeJS.ProcessEnv;
}

export interface CommandOutput {
  /** What `--json` prints. */
  data: unknown;
  /** What a human sees. */
  text: string;
  /** 0 ok, 1 problem found / failure, 2 usage. */
  exitCode: number;
}

export interface Command {
  name: string;
  summary: string;
  usage: string;
  /** What each exit status means for this command (`--help` prints it). */
  exitStatus: string;
  run(argv: string[], ctx: CommandContext): Promise<CommandOutput>;
}

/** A usage mistake: index.ts prints it with the command's usage and exits 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
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
