// Operator CLI: find the command, run it, render once (text or --json). Commands never print or exit.
import { run } from '../effects/exec.js';
import { UsageError, type Command } from './command.js';
import { ABOUT } from '../cni/skel.js';
import { versionText } from './version.js';

const COMMANDS: Record<string, () => Promise<Command>> = {
  plan: async () => (await import('./plan.js')).planCommand,
  doctor: async () => (await import('./doctor.js')).doctorCommand,
  residue: async () => (await import('./residue.js')).residueCommand,
  'probe-rewrite': async () => (await import('./probe-rewrite.js')).probeRewriteCommand,
  'agent-ip': async () => (await import('./agent-ip.js')).agentIpCommand,
  gc: async () => (await import('./gc.js')).gcCommand,
  install: async () => (await import('./install.js')).installCommand,
  agent: async () => (await import('./agent.js')).agentCommand,
  uninstall: async () => (await import('./install.js')).uninstallCommand,
};

export interface CliOutcome {
  stdout: string;
  stderr: string;
  exitCode: number;
}

function help(): string {
  const names = Object.keys(COMMANDS).sort();
  return `${ABOUT}\n\nusage: ipam-shim <command> [flags] [--json]\n\ncommands:\n${names.map((n) => `  ${n}`).join('\n')}\n\nRun "ipam-shim <command> --help" for a command's flags.\n`;
}

export async function runCli(argv: string[], env: NodeJS.ProcessEnv): Promise<CliOutcome> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') return { stdout: help(), stderr: '', exitCode: 0 };
  if (name === '--version') return { stdout: versionText(), stderr: '', exitCode: 0 };
  const load = COMMANDS[name];
  if (!load) return { stdout: '', stderr: `ipam-shim: unknown command "${name}"\n\n${help()}`, exitCode: 2 };
  const command = await load();
  if (rest.includes('--help') || rest.includes('-h')) {
    return { stdout: `${command.summary}\n\n${command.usage}\n\nexit status: ${command.exitStatus}\n`, stderr: '', exitCode: 0 };
  }
  const json = rest.includes('--json');
  const args = rest.filter((a) => a !== '--json');
  try {
    const out = await command.run(args, { run, env });
    const stdout = json ? `${JSON.stringify(out.data, null, 2)}\n` : out.text.endsWith('\n') || out.text === '' ? out.text : `${out.text}\n`;
    return { stdout, stderr: '', exitCode: out.exitCode };
  } catch (e) {
    if (e instanceof UsageError) return { stdout: '', stderr: `ipam-shim ${name}: ${e.message}\n\n${command.usage}\n`, exitCode: 2 };
    const message = e instanceof Error ? e.message : String(e);
    const code = (e as { code?: unknown }).code;
    if (json) return { stdout: `${JSON.stringify({ error: message, code: typeof code === 'number' ? code : undefined }, null, 2)}\n`, stderr: '', exitCode: 1 };
    return { stdout: '', stderr: `ipam-shim ${name}: ${message}\n`, exitCode: 1 };
  }
}
