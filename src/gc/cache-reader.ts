// The runtime's result cache, read in a child process this one can abandon. The cache lives on the node's file
// system, which may stop answering (a hung NFS or FUSE mount under /var/lib/cni): a read blocked in the kernel
// blocks its thread, and no timer, worker terminate() or signal of ours can interrupt it (a FUSE request the server
// has taken waits uninterruptibly; measured: `kill -9` leaves such a reader in D state until the server answers or
// the connection is aborted). So the agent, `ipam-shim gc` and doctor never read the cache themselves: a child
// (this executable, CACHE_READER_ARG) reads it (src/gc/cache-read.ts) and prints the compact view; past the bound
// its process group is killed and it is left behind, and a cache that was not read in time is "could not look"
// (RuntimeCacheError), never "found nothing". At most one reader is left behind at a time: while it is still stuck,
// the next read says so at once instead of leaving another.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isSea } from 'node:sea';
import { run } from '../effects/exec.js';
import type { CacheView } from '../pods/cached-pod.js';
import { readCacheView, RuntimeCacheError } from './cache-read.js';

/** The hidden argument that makes this executable the cache reader (src/main.ts). */
const CACHE_READER_ARG = '__read-runtime-cache';

/**
 * How long a read may take: 10,000 libcni entries (the most a pass takes) read in ~1.5 s on a loaded node; well
 * within the agent's 120 s step bound and its 40 s SIGTERM bound, so both keep working whatever the file system does.
 */
const CACHE_READ_TIMEOUT_MS = 20_000;

/** What the reader child prints: the view, or why the list is unknowable. */
type ReaderAnswer = { view: CacheView } | { refused: { path: string; why: string } };

/**
 * This executable, as it was started: the single executable itself, or the bundle under node (`node
 * dist/ipam-shim.js`). From sources (the unit tests) there is no executable to start: undefined, and the cache is
 * read in this process (starting src/main.ts through tsx costs ~0.6 s of CPU a read); the built executable's reader
 * is what test/e2e/cache-hang.test.ts holds to its bound.
 */
function readerCommand(): { file: string; args: string[] } | undefined {
  if (isSea()) return { file: process.execPath, args: [] };
  // The build defines IPAM_SHIM_VERSION in the bundle; from sources it is unset.
  if (process.env.IPAM_SHIM_VERSION !== undefined && process.argv[1]) return { file: process.execPath, args: [process.argv[1]] };
  return undefined;
}

/** A reader left behind (timed out, not exited): its pid while /proc says it is still our child. */
let leftBehind: number | undefined;

function stillStuck(): number | undefined {
  if (leftBehind === undefined) return undefined;
  try {
    // /proc/<pid>/stat: "pid (comm) state ppid …"; comm may hold spaces and parentheses: split after the last ')'.
    const stat = readFileSync(`/proc/${leftBehind}/stat`, 'utf8');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid === process.pid) return leftBehind;
  } catch {
    // gone
  }
  leftBehind = undefined;
  return undefined;
}

export interface CacheReadOptions {
  /** CACHE_READ_TIMEOUT_MS unless given. */
  timeoutMs?: number | undefined;
  /** Once aborted (the agent's SIGTERM): answered at once as "could not look"; the child runs out its bound alone. */
  signal?: AbortSignal | undefined;
}

/** The view the child read, or RuntimeCacheError: the cache could not be looked at (in time). */
export async function readInChild(cacheDir: string, network: string, o: CacheReadOptions = {}): Promise<CacheView> {
  const dir = join(cacheDir, 'results');
  const stuck = stillStuck();
  if (stuck !== undefined)
    throw new RuntimeCacheError(dir, `an earlier read of it (pid ${stuck}) is still blocked in the kernel (a file system that stopped answering?)`);
  const timeoutMs = o.timeoutMs ?? CACHE_READ_TIMEOUT_MS;
  const reader = readerCommand();
  if (!reader) return readCacheView(cacheDir, network);
  const { file, args } = reader;
  const reading = run(file, [...args, CACHE_READER_ARG, cacheDir, network], { timeoutMs, check: false }).then((r) => {
    if (r.timedOut) {
      leftBehind = r.exitCode === undefined ? r.pid : undefined;
      throw new RuntimeCacheError(dir, `it was not read within ${timeoutMs / 1000} s (a file system that stopped answering?)`);
    }
    let answer: ReaderAnswer | undefined;
    try {
      answer = r.exitCode === 0 ? (JSON.parse(r.stdout) as ReaderAnswer) : undefined;
    } catch {
      answer = undefined;
    }
    if (!answer) {
      const said = r.stderr.trim().split('\n')[0] ?? '';
      throw new RuntimeCacheError(
        dir,
        `its reader failed (${r.spawnError ?? (r.exitCode === undefined ? 'killed' : `exit ${r.exitCode}`)}${said ? `: ${JSON.stringify(said.slice(0, 200))}` : ''})`,
      );
    }
    if ('refused' in answer) throw new RuntimeCacheError(answer.refused.path, answer.refused.why);
    return answer.view;
  });
  const { signal } = o;
  if (!signal) return reading;
  if (signal.aborted) {
    reading.catch(() => undefined);
    throw new RuntimeCacheError(dir, 'stopped before it was read');
  }
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<never>((_, reject) => {
    onAbort = () => reject(new RuntimeCacheError(dir, 'stopped before it was read'));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  reading.catch(() => undefined);
  try {
    return await Promise.race([reading, stopped]);
  } finally {
    signal.removeEventListener('abort', onAbort!);
  }
}
