// Build time only (scripts/build.mjs, the single executable's V8 startup snapshot, src/snapshot.ts): evaluate the
// modules a CNI call needs and run the real verbs once on made-up input, so the snapshot holds them evaluated and
// compiled (bytecode, zod's parsers built) and no invocation pays for that again.
//
// The sample ADD and DEL are real CNI calls through runPlugin (the dispatcher, the logger on a file, the context
// builder with the file-backed ledger, the delegate runner, the verbs), with a scripted Run answering for a
// stand-in delegate and, from each fix's own answers (Fix.warm), for the node's tools with their real output and
// for the /proc files read instead of starting a tool: every ADD and DEL step of every fix is warmed, a new one
// included, without a copy of the steps here. Code a call runs that the warm-up did not is
// parsed and compiled on every call (~0.1 ms per function).
//
// Nothing here may leave state a call could see: the snapshot is shared by every invocation. Files: a private
// temp dir (the ledger, the log, the stand-in delegate), removed before the snapshot is written; the lock module
// reads the process's identity per process (src/effects/lock.ts). The spans the verbs record go.
// The node's tools (ebtables, ip, nft) are never run here: the build machine's network is not ours.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scriptedRun } from './scripted/scripted-run.js';
import { takeSpans } from './spans.js';
import { FIXES } from './fix-list/registry.js';

const DELEGATE = 'warm-ipam';
const conf = (dir: string) => ({
  cniVersion: '1.0.0',
  name: 'warm',
  type: 'ptp',
  ipam: {
    type: 'ipam-shim',
    stateDir: join(dir, 'state'),
    logFile: join(dir, 'shim.log'),
    reservedCIDRs: ['192.0.2.0/24', '2001:db8::/32'],
    delegate: { type: DELEGATE, ranges: [[{ subnet: '10.0.0.0/24' }]] },
  },
});
const RESULT = {
  cniVersion: '1.0.0',
  interfaces: [{ name: 'eth0', mac: '02:00:00:00:00:01', sandbox: '/run/netns/x' }],
  ips: [
    { address: '10.0.0.2/24', gateway: '10.0.0.1', interface: 0 },
    { address: 'fd00::2/64', gateway: 'fd00::1', interface: 0 },
  ],
  routes: [{ dst: '0.0.0.0/0' }],
  dns: {},
};
/** Every fix's /proc answers. */
const PROC = new Map(FIXES.flatMap((f) => Object.entries(f.warm?.proc ?? {})));

/**
 * The answers of the stand-in delegate (VERSION, ADD with RESULT, DEL), then every fix's (Fix.warm: the node's
 * tools as they print, and the /proc files they read), so that each fix's ADD, DEL and STATUS branches a real
 * call takes are the ones warmed; the rest is absent.
 */
export const warmRun = scriptedRun(
  (file, args, opts) => {
    if (file.endsWith(`/${DELEGATE}`)) {
      const command = opts.env?.CNI_COMMAND;
      return command === 'VERSION'
        ? JSON.stringify({ cniVersion: '1.1.0', supportedVersions: ['0.3.1', '0.4.0', '1.0.0', '1.1.0'] })
        : command === 'ADD'
          ? JSON.stringify(RESULT)
          : '';
    }
    for (const fix of FIXES) {
      const answer = fix.warm?.run(file, args, opts);
      if (answer !== undefined) return answer;
    }
    return undefined;
  },
  [],
  (path) => {
    const text = PROC.get(path);
    if (text === undefined) throw new Error(`snapshot warm-up: no /proc answer for ${path}`);
    return text;
  },
);

/** `commands`: the calls to warm (all by default: the snapshot; one verb: that verb's code cache). */
export async function warm(commands: readonly string[] = ['ADD', 'DEL', 'STATUS', 'error']): Promise<void> {
  const does = (c: string) => commands.includes(c);
  // The one built-in module an ADD needs beyond Node's own start-up: child processes (src/effects/exec.ts loads
  // it at the first program run; held here, the calls that run one deserialise it instead). Left out, VERSION and
  // a chained STATUS were 1–2 ms cheaper, but the IPAM slot's STATUS, ADD and DEL 1–4 ms dearer and ADD's peak RSS
  // higher (issue 44, docs/performance.md). File calls are synchronous (no fs/promises); pino's worker threads are
  // not bundled.
  if (does('ADD') || does('DEL')) process.getBuiltinModule('node:child_process');
  // The modules the verbs load at run time, evaluated now (their top levels are pure).
  const { runPlugin } = await import('./plugin.js');
  if (does('ADD')) await import('./verbs/add.js');
  if (does('DEL')) await import('./verbs/del.js');
  if (does('ADD')) await import('./verbs/check.js');
  // STATUS too: containerd ≥ 2.0.1 sends it every 5 s per node when the list is at 1.1.0 (docs/performance.md).
  if (does('STATUS')) await import('./verbs/status.js');
  const dir = mkdtempSync(join(tmpdir(), 'ipam-shim-warm-'));
  try {
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    // The delegate is found on CNI_PATH as a real one is, but never started: warmRun answers for it. A warm-up
    // that started it through the exec wrapper (a child process, its pipes and timers) built a snapshot in which
    // a call's later timer wait (the ledger lock's retry) never fired: the call ran out of work and exited 0 with
    // nothing on stdout (45 of 64 concurrent ADDs; test/e2e/concurrency.test.ts keeps it from coming back).
    // Nothing here starts a program.
    writeFileSync(join(bin, DELEGATE), '');
    chmodSync(join(bin, DELEGATE), 0o755);
    const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'warm', CNI_NETNS: '/run/netns/warm', CNI_IFNAME: 'eth0', CNI_PATH: bin };
    const call = (command: string, c: unknown) => runPlugin({ ...env, CNI_COMMAND: command }, () => Promise.resolve(JSON.stringify(c)), {}, warmRun);
    const good = conf(dir);
    // A warm-up that quietly took the error path would leave the ADD path cold: fail the build instead. DEL
    // alone deletes what a sample ADD made (the ledger record), as a runtime's DEL after its ADD.
    if (does('ADD') || does('DEL')) {
      const added = await call('ADD', good);
      if (added.exitCode !== 0) throw new Error(`snapshot warm-up: the sample ADD failed: ${added.stdout}`);
    }
    if (does('DEL')) {
      const deleted = await call('DEL', good);
      if (deleted.exitCode !== 0) throw new Error(`snapshot warm-up: the sample DEL failed: ${deleted.stdout}`);
    }
    if (does('STATUS')) {
      const status = await call('STATUS', { ...good, cniVersion: '1.1.0' });
      if (status.exitCode !== 0) throw new Error(`snapshot warm-up: the sample STATUS failed: ${status.stdout}`);
      // Chained too: the shim's own entry of the list (no delegate process).
      const chained = await call('STATUS', { ...good.ipam, cniVersion: '1.1.0', name: 'warm' });
      if (chained.exitCode !== 0) throw new Error(`snapshot warm-up: the sample chained STATUS failed: ${chained.stdout}`);
    }
    if (does('error')) await call('ADD', { ...good, ipam: { ...good.ipam, delegate: 'x' } }); // an invalid config: the error path
  } finally {
    rmSync(dir, { recursive: true, force: true });
    // The spans the verbs recorded (the log lines' timings) must not show up in a real call's.
    takeSpans();
  }
}
