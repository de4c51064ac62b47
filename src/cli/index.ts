// Operator CLI: find the command, run it, render once (text or --json). Commands never print or exit.
// Exit statuses (docs/cli.md): 0 fine, 1 found a problem, 2 usage, 3 could not run.
import { run } from '../effects/exec.js';
import { commandHelp, Exit, ProblemFound, UsageError, type Command } from '../contract/command.js';
import { ABOUT } from '../cni/skel.js';
import { versionJson, versionText } from './version.js';
import { FIXES } from '../fix-list/registry.js';
import { forTerminal } from '../terminal.js';

/** Each fix's own commands (Fix.commands), handed the registry's list of fixes. */
const fixCommands = (): Record<string, () => Promise<Command>> =>
  Object.fromEntries(FIXES.flatMap((f) => Object.entries(f.commands ?? {}).map(([name, load]) => [name, () => load(FIXES)] as const)));

/**
 * Each command's module, loaded only when it runs (none of them is on the CNI call's path: src/main.ts): the
 * node's commands here, each fix's own from the registry (Fix.commands).
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  ...fixCommands(),
  doctor: async () => (await import('./doctor.js')).doctorCommand,
  gc: async () => (await import('./gc.js')).gcCommand,
  install: async () => (await import('./install.js')).installCommand,
  agent: async () => (await import('./agent.js')).agentCommand,
  uninstall: async () => (await import('./install.js')).uninstallCommand,
  ledger: async () => (await import('./ledger.js')).ledgerCommand,
  version: async () => (await import('./version.js')).versionCommand,
  completion: async () => (await import('./completion.js')).completionCommand(allCommands),
};

/** Every command but completion, loaded: what the completion script offers. */
const allCommands = (): Promise<Command[]> => Promise.all(Object.entries(COMMANDS).flatMap(([n, load]) => (n === 'completion' ? [] : [load()])));

/**
 * `-o json`, `-o=json`, `-ojson`, `--output json`, `--output=json`: --json, as kubectl and az spell it (`text` is the
 * default). Any other format is a usage error. Only before a `--` (none of our commands takes one).
 */
function outputFlags(args: string[]): { args: string[]; json: boolean } | { error: string } {
  const out: string[] = [];
  let json = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    let format: string | undefined;
    if (a === '-o' || a === '--output') {
      format = args[++i];
      if (format === undefined) return { error: `${a} needs a format: json or text` };
    } else if (a.startsWith('--output=')) format = a.slice(9);
    else if (a.startsWith('-o') && !a.startsWith('--')) format = a.slice(a[2] === '=' ? 3 : 2);
    else {
      if (a === '--json') json = true;
      else out.push(a);
      continue;
    }
    if (format === 'json') json = true;
    else if (format !== 'text') return { error: `${a.startsWith('--') ? '--output' : '-o'}: unknown format "${format}" (json or text)` };
  }
  return { args: out, json };
}

export interface CliOutcome {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** The top-level help: every command with its one-line summary (each command's module is loaded to read it). */
async function help(): Promise<string> {
  const names = Object.keys(COMMANDS).sort();
  const summaries = await Promise.all(names.map(async (n) => (await COMMANDS[n]!()).summary));
  const width = Math.max(...names.map((n) => n.length));
  const list = names.map((n, i) => `  ${n.padEnd(width)}  ${summaries[i]}`).join('\n');
  return `${ABOUT}

usage: ipam-shim <command> [flags] [--json | -o json]
       ipam-shim --version | -v

commands:
${list}

Run "ipam-shim help <command>" or "ipam-shim <command> --help" for a command's flags and examples.
exit status (every command): 0 fine; 1 found a problem; 2 usage; 3 could not run
`;
}

/** Edit distance (insertions, deletions, substitutions, adjacent swaps): how far a misspelt command is from a real one. */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** The commands a mistyped name most likely meant: within 2 edits (1 for names of up to 4 letters), or a prefix of one. */
export function suggest(name: string): string[] {
  const close = Object.keys(COMMANDS)
    .map((c) => [c, distance(name, c)] as const)
    .filter(([c, d]) => d <= (name.length <= 4 ? 1 : 2) || (name.length >= 2 && c.startsWith(name)))
    .sort((x, y) => x[1] - y[1] || (x[0] < y[0] ? -1 : 1));
  return close.map(([c]) => c);
}

async function unknownCommand(name: string): Promise<CliOutcome> {
  const near = suggest(name);
  const hint = near.length ? `\n\ndid you mean ${near.map((n) => `"ipam-shim ${n}"`).join(' or ')}?` : `\n\n${await help()}`;
  return { stdout: '', stderr: `ipam-shim: unknown command "${name}"${hint}\n`, exitCode: Exit.USAGE };
}

/**
 * Every command's output as it reaches the operator's terminal: no control character but the layout's own
 * newlines and tabs (the printers show each value from outside through shown(); this catches what one missed).
 */
export async function runCli(argv: string[], env: NodeJS.ProcessEnv): Promise<CliOutcome> {
  const out = await outcome(argv, env);
  return { ...out, stdout: forTerminal(out.stdout), stderr: forTerminal(out.stderr) };
}

async function outcome(argv: string[], env: NodeJS.ProcessEnv): Promise<CliOutcome> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h') return { stdout: await help(), stderr: '', exitCode: Exit.OK };
  if (name === 'help') {
    const [topic, ...extra] = rest;
    if (!topic) return { stdout: await help(), stderr: '', exitCode: Exit.OK };
    if (extra.length) return { stdout: '', stderr: `ipam-shim help: one command at a time, got ${rest.join(' ')}\n`, exitCode: Exit.USAGE };
    const load = COMMANDS[topic];
    if (!load) return unknownCommand(topic);
    return { stdout: commandHelp(await load()), stderr: '', exitCode: Exit.OK };
  }
  if (name === '--version' || name === '-v') {
    const o = outputFlags(rest);
    if ('error' in o) return { stdout: '', stderr: `ipam-shim ${name}: ${o.error}\n`, exitCode: Exit.USAGE };
    if (o.args.length) return { stdout: '', stderr: `ipam-shim ${name}: unexpected argument "${o.args[0]}"\n`, exitCode: Exit.USAGE };
    return { stdout: o.json ? `${JSON.stringify(versionJson(), null, 2)}\n` : versionText(), stderr: '', exitCode: Exit.OK };
  }
  const load = COMMANDS[name];
  if (!load) return unknownCommand(name);
  const command = await load();
  if (rest.includes('--help') || rest.includes('-h')) return { stdout: commandHelp(command), stderr: '', exitCode: Exit.OK };
  const o = outputFlags(rest);
  const json = 'error' in o ? false : o.json;
  const args = 'error' in o ? rest : o.args;
  try {
    if ('error' in o) throw new UsageError(o.error);
    if (json && command.json === false)
      throw new UsageError("--json: this command has no JSON output (the agent's output is its log lines; completion's a script)");
    const out = await command.run(args, { run, env });
    const stdout = json ? `${JSON.stringify(out.data, null, 2)}\n` : out.text.endsWith('\n') || out.text === '' ? out.text : `${out.text}\n`;
    return { stdout, stderr: '', exitCode: out.exitCode };
  } catch (e) {
    if (e instanceof UsageError)
      return {
        stdout: '',
        stderr: `ipam-shim ${name}: ${e.message}\n\n${command.usage}\nRun "ipam-shim help ${name}" for its flags and examples.\n`,
        exitCode: Exit.USAGE,
      };
    const message = e instanceof Error ? e.message : String(e);
    const code = (e as { code?: unknown }).code;
    const exitCode = e instanceof ProblemFound ? Exit.FOUND : Exit.COULD_NOT_RUN;
    if (json)
      return { stdout: `${JSON.stringify({ error: message, code: typeof code === 'number' ? code : undefined }, null, 2)}\n`, stderr: '', exitCode };
    return { stdout: '', stderr: `ipam-shim ${name}: ${message}\n`, exitCode };
  }
}
