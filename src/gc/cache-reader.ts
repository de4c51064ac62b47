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
import { run, startChild, type LongLivedChild } from '../effects/exec.js';
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
  const reading = warm ? warm.read(reader, cacheDir, network, timeoutMs) : readOnce(reader, dir, cacheDir, network, timeoutMs);
  return answeredOrStopped(reading, dir, o.signal);
}

/** The one-shot reader (`ipam-shim gc`, doctor): a fresh child for this read. */
function readOnce(reader: { file: string; args: string[] }, dir: string, cacheDir: string, network: string, timeoutMs: number): Promise<CacheView> {
  const { file, args } = reader;
  return run(file, [...args, CACHE_READER_ARG, cacheDir, network], { timeoutMs, check: false }).then((r) => {
    if (r.timedOut) {
      leftBehind = r.exitCode === undefined ? r.pid : undefined;
      throw new RuntimeCacheError(dir, `it was not read within ${timeoutMs / 1000} s (a file system that stopped answering?)`);
    }
    const answer = r.exitCode === 0 ? answerOf(r.stdout) : undefined;
    if (!answer) {
      const said = r.stderr.trim().split('\n')[0] ?? '';
      throw new RuntimeCacheError(
        dir,
        `its reader failed (${r.spawnError ?? (r.exitCode === undefined ? 'killed' : `exit ${r.exitCode}`)}${said ? `: ${JSON.stringify(said.slice(0, 200))}` : ''})`,
      );
    }
    return viewOf(answer);
  });
}

/** What a reader printed, when it is an answer (a view or a refusal); undefined for anything else. */
function answerOf(text: string): (ReaderAnswer & { id?: unknown }) | undefined {
  try {
    const answer = JSON.parse(text) as (ReaderAnswer & { id?: unknown }) | null;
    return answer && typeof answer === 'object' && ('view' in answer || 'refused' in answer) ? answer : undefined;
  } catch {
    return undefined;
  }
}

function viewOf(answer: ReaderAnswer): CacheView {
  if ('refused' in answer) throw new RuntimeCacheError(answer.refused.path, answer.refused.why);
  return answer.view;
}

/** `reading`, or "could not look" at once when `signal` is aborted (the reader runs out its bound alone). */
async function answeredOrStopped(reading: Promise<CacheView>, dir: string, signal: AbortSignal | undefined): Promise<CacheView> {
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

/** The most one answer of the warm reader may hold (what the one-shot reader's output may: src/effects/exec.ts). */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/**
 * The node agent's warm reader: one long-lived child (CACHE_READER_ARG --serve) kept between passes, so the code
 * that parses the cache stays compiled (a fresh single executable spent ~0.45 s of CPU a 5,000-entry pass on it:
 * docs/performance.md). It keeps every promise of the one-shot reader: a read not answered within its bound is
 * "could not look", the child's group is killed and it is left behind (stillStuck); a child that exits or writes
 * garbage fails the read in flight and the next read starts a new one; at most one child, its pipes and listeners
 * released when it is dropped. Reads are taken one at a time.
 */
class WarmReader {
  private child: LongLivedChild | undefined;
  /** The read in flight: its id and how to settle it. */
  private waiting: { id: number; resolve: (a: ReaderAnswer) => void; reject: (why: string) => void } | undefined;
  private buffered: Buffer[] = [];
  private bufferedBytes = 0;
  private nextId = 1;
  /** Reads queue behind the one in flight (each bounded by its own timeout). */
  private queue: Promise<unknown> = Promise.resolve();

  read(reader: { file: string; args: string[] }, cacheDir: string, network: string, timeoutMs: number): Promise<CacheView> {
    const dir = join(cacheDir, 'results');
    const mine = this.queue.then(() => this.readNow(reader, dir, cacheDir, network, timeoutMs));
    this.queue = mine.catch(() => undefined);
    return mine;
  }

  private async readNow(
    reader: { file: string; args: string[] },
    dir: string,
    cacheDir: string,
    network: string,
    timeoutMs: number,
  ): Promise<CacheView> {
    // Queued behind a read that was left behind: say so at once, as a fresh read would.
    const stuck = stillStuck();
    if (stuck !== undefined)
      throw new RuntimeCacheError(dir, `an earlier read of it (pid ${stuck}) is still blocked in the kernel (a file system that stopped answering?)`);
    const child = (this.child ??= this.start(reader));
    const id = this.nextId++;
    let timer: NodeJS.Timeout | undefined;
    try {
      const answer = await new Promise<ReaderAnswer>((resolve, reject) => {
        this.waiting = { id, resolve, reject: (why) => reject(new RuntimeCacheError(dir, `its reader failed (${why})`)) };
        timer = setTimeout(() => {
          this.waiting = undefined;
          // Killed with its group; one stuck in the kernel stays: left behind, and the next read says so.
          leftBehind = child.pid;
          this.drop();
          reject(new RuntimeCacheError(dir, `it was not read within ${timeoutMs / 1000} s (a file system that stopped answering?)`));
        }, timeoutMs);
        if (!child.write(`${JSON.stringify({ id, cacheDir, network })}\n`)) this.fail('its input pipe is closed');
      });
      return viewOf(answer);
    } finally {
      clearTimeout(timer);
    }
  }

  private start(reader: { file: string; args: string[] }): LongLivedChild {
    this.buffered = [];
    this.bufferedBytes = 0;
    const child = startChild(reader.file, [...reader.args, CACHE_READER_ARG, '--serve'], {
      onStdout: (b) => this.onStdout(child, b),
      onExit: (why) => {
        if (this.child !== child) return;
        const said = child.stderrTail().trim().split('\n')[0] ?? '';
        this.child = undefined;
        this.fail(`${why}${said ? `: ${JSON.stringify(said.slice(0, 200))}` : ''}`);
      },
    });
    return child;
  }

  private onStdout(child: LongLivedChild, b: Buffer): void {
    if (this.child !== child) return;
    let nl = b.indexOf(10);
    if (nl < 0) {
      this.buffered.push(b);
      this.bufferedBytes += b.length;
      if (this.bufferedBytes > MAX_ANSWER_BYTES) this.fail(`an answer longer than ${MAX_ANSWER_BYTES} bytes`);
      return;
    }
    let rest = b;
    while (nl >= 0) {
      const line = Buffer.concat([...this.buffered, rest.subarray(0, nl)]).toString('utf8');
      this.buffered = [];
      this.bufferedBytes = 0;
      rest = rest.subarray(nl + 1);
      const answer = answerOf(line);
      const w = this.waiting;
      if (!w || !answer || answer.id !== w.id) {
        this.fail('it wrote something that is not an answer');
        return;
      }
      this.waiting = undefined;
      w.resolve(answer);
      nl = rest.indexOf(10);
    }
    if (rest.length) {
      this.buffered.push(rest);
      this.bufferedBytes = rest.length;
    }
  }

  /** The read in flight is "could not look"; the child is dropped (a new one next read). */
  fail(why: string): void {
    const w = this.waiting;
    this.waiting = undefined;
    this.drop();
    w?.reject(why);
  }

  /** Kills the child's group and releases its pipes and listeners. */
  private drop(): void {
    const child = this.child;
    this.child = undefined;
    this.buffered = [];
    this.bufferedBytes = 0;
    child?.kill();
  }
}

let warm: WarmReader | undefined;

/**
 * From now on, this process's reads go to one warm reader kept between reads (the node agent, which reads every
 * pass); `ipam-shim gc` and doctor read once and keep the one-shot child. The returned function stops the reader
 * (the agent's exit): its group killed, so no process of ours is left.
 */
export function keepReaderWarm(): () => void {
  const w = (warm ??= new WarmReader());
  return () => {
    if (warm === w) warm = undefined;
    // A read still in flight (its caller already answered on SIGTERM) ends now, not at its bound.
    w.fail('the agent stopped');
  };
}
