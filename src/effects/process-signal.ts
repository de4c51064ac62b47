// Another process of this pid namespace: its command line as the kernel holds it, and a signal to it. For
// `ipam-shim agent reload`, run with `kubectl exec` in the agent's container, where there is no `kill` program.
import { readFileSync } from 'node:fs';

/** `pid`'s argv (/proc/<pid>/cmdline); throws when there is no such process or it cannot be read (code ENOENT, EACCES…). */
export function commandLine(pid: number): string[] {
  const raw = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  return raw.split('\0').filter((a, i, all) => a !== '' || i < all.length - 1);
}

/** Sends `signal` to `pid`; throws (ESRCH, EPERM) when it cannot. */
export function sendSignal(pid: number, signal: NodeJS.Signals): void {
  process.kill(pid, signal);
}
