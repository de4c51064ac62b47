// The node agent (`ipam-shim agent`) as the suites and the agent soak run it: its arguments over a node's
// directories, and its JSON log lines read back from its output as it runs. Imports nothing that needs a build, so
// the soak can name another executable (IPAM_SHIM_AGENT).
import { execa, type ResultPromise } from 'execa';
import { waitFor } from '../wait.js';

/** The directories and network an agent works on, as its flags name them. */
export interface AgentNode {
  network: string;
  confDir: string;
  cniPath: string;
  cacheDir: string;
  binDir: string;
}

/**
 * `agent` and its flags (what follows the executable): the node's directories, `exe` as the source it installs,
 * no jitter; `graceSeconds` when given (default: the agent's own). The caller's flags go after these.
 */
export function agentArgs(exe: string, n: AgentNode, o: { graceSeconds?: number } = {}): string[] {
  return [
    ...['agent', '--network', n.network, '--conf-dir', n.confDir, '--cni-path', n.cniPath],
    ...['--cache-dir', n.cacheDir, '--cni-bin-dir', n.binDir, '--source', exe],
    ...(o.graceSeconds === undefined ? [] : ['--grace-seconds', String(o.graceSeconds)]),
    ...['--jitter', '0'],
  ];
}

/**
 * The JSON lines of an agent's output (it logs one object a line; anything else is skipped). The text after the last
 * newline is a line still being written, read when it is complete.
 */
export const jsonLines = (text: string): Array<Record<string, any>> =>
  text
    .split('\n')
    .slice(0, -1)
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, any>);

/** A reconcile pass's closing line ("reconcile pass …"). */
export const isPass = (line: Record<string, any>): boolean => String(line.msg).startsWith('reconcile pass');

/** A running agent: its process, and its output as it comes. */
export interface RunningAgent {
  proc: ResultPromise;
  /** Everything it wrote so far, stdout and stderr as they came. */
  text: () => string;
  lines: () => Array<Record<string, any>>;
  passes: () => Array<Record<string, any>>;
}

/** Follows an agent's stdout and stderr (`proc` started with `buffer: false`). */
export function followAgent(proc: ResultPromise): RunningAgent {
  let text = '';
  proc.stdout!.on('data', (d: Buffer) => (text += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (text += d.toString()));
  const lines = () => jsonLines(text);
  return { proc, text: () => text, lines, passes: () => lines().filter(isPass) };
}

/** Sends SIGHUP and waits for the pass it starts to end. */
export async function onePass(a: RunningAgent): Promise<Record<string, any>> {
  const before = a.passes().length;
  a.proc.kill('SIGHUP');
  await waitFor('a pass after SIGHUP', () => a.passes().length > before);
  return a.passes()[before]!;
}

/** A GET from inside `node` with Node's fetch: the agent listens on the node's loopback. */
export async function agentGet(node: string, path: string, port = 9740): Promise<{ status: number; body: string }> {
  const script = `const r = await fetch('http://127.0.0.1:${port}${path}'); process.stdout.write(JSON.stringify({ status: r.status, body: await r.text() }));`;
  const out = await execa('ip', ['netns', 'exec', node, process.execPath, '--input-type=module', '-e', script]);
  return JSON.parse(out.stdout) as { status: number; body: string };
}
