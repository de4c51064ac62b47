// Entry point only: CNI_COMMAND set → the plugin; arguments → the operator CLI; neither → the about line.
// The only place that writes final output and sets the exit code. Modules load lazily so VERSION stays cheap.
import { ABOUT } from './cni/skel.js';

async function main(): Promise<number> {
  if (process.env.CNI_COMMAND) {
    const { runPlugin } = await import('./plugin.js');
    const { stdout, exitCode } = await runPlugin(process.env, process.stdin);
    await write(stdout);
    return exitCode;
  }
  const argv = process.argv.slice(2);
  if (argv.length === 0) {
    process.stderr.write(`${ABOUT}\n`);
    return 0;
  }
  const { runCli } = await import('./cli/index.js');
  const { stdout, stderr, exitCode } = await runCli(argv, process.env);
  if (stderr) process.stderr.write(stderr);
  await write(stdout);
  return exitCode;
}

function write(text: string): Promise<void> {
  return new Promise((resolve) => (text ? process.stdout.write(text, () => resolve()) : resolve()));
}

main().then(
  (code) => process.exit(code),
  (e) => {
    // Unreachable by design (every path returns an outcome); still never crash silently.
    process.stderr.write(`ipam-shim: ${e instanceof Error ? e.stack : String(e)}\n`);
    process.stdout.write(JSON.stringify({ cniVersion: '1.1.0', code: 999, msg: String(e instanceof Error ? e.message : e) }), () => process.exit(1));
  },
);
