// `ipam-shim agent reload`: a reconcile pass now, from `kubectl exec` in the agent's container. The image holds the
// shim and little else (no `kill`), so the shim sends the agent its SIGHUP itself: to pid 1 (the container's only
// command), only after reading that pid 1 is an ipam-shim agent, never to whatever else pid 1 is (on a node, SIGHUP
// makes systemd reload). A hidden --pid names another process (the tests' agent).
import { basename } from 'node:path';
import { commandLine, sendSignal } from '../effects/process-signal.js';
import { shown } from '../terminal.js';
import { parseArgv, UsageError, type CommandOutput } from '../contract/command.js';

/** PURE: whether an argv is a running `ipam-shim agent` (the executable, or node running the bundle), not a CLI call of it. */
export function isAgentCommandLine(argv: readonly string[]): boolean {
  const at = argv.slice(0, 2).findIndex((a) => /^ipam-shim(\.js)?$/.test(basename(a)));
  return at >= 0 && argv[at + 1] === 'agent' && argv[at + 2] !== 'reload';
}

export async function agentReload(argv: string[]): Promise<CommandOutput> {
  const { values, positionals } = parseArgv({ args: argv, options: { pid: { type: 'string', default: '1' } }, strict: true, allowPositionals: true });
  if (positionals.length) throw new UsageError(`agent reload: unexpected argument "${positionals[0]}"`);
  if (!/^[1-9][0-9]{0,9}$/.test(values.pid)) throw new UsageError(`--pid takes a process id, got ${JSON.stringify(values.pid)}`);
  const pid = Number(values.pid);
  let argvOf: string[];
  try {
    argvOf = commandLine(pid);
  } catch (e) {
    const code = (e as { code?: string }).code;
    throw new Error(
      code === 'ENOENT'
        ? `no process ${pid} here: run this in the agent's container (kubectl -n kube-system exec ds/ipam-shim -- ipam-shim agent reload)`
        : `cannot read the command line of process ${pid}: ${(e as Error).message}`,
    );
  }
  if (!isAgentCommandLine(argvOf))
    throw new Error(
      `process ${pid} is not an ipam-shim agent (${shown(argvOf.slice(0, 4).join(' ')) || 'no command line'}): nothing signalled; run this in the agent's container (kubectl -n kube-system exec ds/ipam-shim -- ipam-shim agent reload)`,
    );
  sendSignal(pid, 'SIGHUP');
  return {
    data: { pid, signal: 'SIGHUP' },
    text: `sent SIGHUP to the ipam-shim agent (pid ${pid}): it runs a reconcile pass now (its log: "SIGHUP: reconcile pass now")`,
    exitCode: 0,
  };
}
