// A CNI call's peak memory, as the kernel counts it: the built single executable run directly under time(1)
// (`%M`: the largest resident set, KiB). What a call costs when a file it reads is hostile (issue 45: a symlink to
// /dev/zero or a sparse file read whole cost each call 585–1,966 MiB).
import { execa } from 'execa';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PLUGIN_DIR, SEA_SHIM } from './cni.js';
import { uid } from '../net/netns.js';

/**
 * The peak RSS (KiB) of one whole CNI call with `conf`: a DEL of a chained attachment that was never recorded (a
 * whole call that opens the log and writes the metrics, no namespace needed). Throws when the call fails.
 */
export async function peakRssOfDel(conf: unknown, cniArgs: string, timeoutMs: number): Promise<number> {
  const out = await mkdtemp(join(tmpdir(), 'ipam-shim-rss-'));
  try {
    const r = await execa('/usr/bin/time', ['-f', '%M', '-o', join(out, 'rss'), SEA_SHIM], {
      input: JSON.stringify(conf),
      env: {
        PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
        CNI_COMMAND: 'DEL',
        CNI_CONTAINERID: `rss-${uid()}`,
        CNI_IFNAME: 'eth0',
        CNI_NETNS: '',
        CNI_ARGS: cniArgs,
        CNI_PATH: PLUGIN_DIR,
      },
      extendEnv: false,
      reject: false,
      timeout: timeoutMs,
    });
    if (r.exitCode !== 0) throw new Error(`DEL exited ${r.exitCode}: ${r.stdout} ${r.stderr}`);
    return Number((await readFile(join(out, 'rss'), 'utf8')).trim().split('\n').at(-1));
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}
