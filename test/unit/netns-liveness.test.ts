// The one rule ADD (11, src/gc/stale.ts) and GC (src/gc/run-gc.ts) apply to a record's netns path: what a look at
// it proves. Gone only with proof; every newer proof only from the view the ADD recorded the path from.
import { describe, expect, it } from 'vitest';
import { netnsVerdict, PROC_PID_INIT_INO, procPidOf, type ReaderView, sameView } from '../../src/ledger/netns-liveness.js';
import type { NetnsIdentity } from '../../src/ledger/record.js';

const NSFS = 4;
const id: NetnsIdentity = { dev: NSFS, ino: 4026532500, mntns: 4026531832, pidns: 4026531836 };
/** The ADD's own view. */
const view: ReaderView = { mntns: { dev: NSFS, ino: 4026531832 }, pidns: { dev: NSFS, ino: 4026531836 }, procOwn: true };
/** Another mount namespace (a pod without the host's mounts propagated) and another pid namespace. */
const other: ReaderView = { mntns: { dev: NSFS, ino: 4026532900 }, pidns: { dev: NSFS, ino: 4026532901 }, procOwn: true };

const path = '/run/netns/cni-1';
const proc = '/proc/4242/ns/net';
const rec = (netns: string, netnsId?: NetnsIdentity) => ({ netns, netnsId });

describe('netnsVerdict', () => {
  it('keeps the old rules: a missing path is gone only with its directory in sight; a namespace is looked into', () => {
    expect(netnsVerdict(rec(''), { kind: 'unreadable' }, () => view)).toBe('gone');
    expect(netnsVerdict(rec(path), { kind: 'missing', dirInSight: true }, () => other)).toBe('gone');
    expect(netnsVerdict(rec(path), { kind: 'missing', dirInSight: false }, () => view)).toBe('unknown');
    expect(netnsVerdict(rec(path), { kind: 'unreadable' }, () => view)).toBe('unknown');
    expect(netnsVerdict(rec(path), { kind: 'netns', dev: NSFS, ino: 4026532500 }, () => view)).toBe('look');
  });

  it('a path that names no namespace (a regular file, a directory) is gone, seen from the ADD’s mount namespace only', () => {
    expect(netnsVerdict(rec(path, id), { kind: 'not-netns' }, () => view)).toBe('gone');
    // Elsewhere, the empty mount-point file is what a namespace mounted after this process started looks like.
    expect(netnsVerdict(rec(path, id), { kind: 'not-netns' }, () => other)).toBe('unknown');
    expect(netnsVerdict(rec(path, id), { kind: 'not-netns' }, () => ({ procOwn: true }))).toBe('unknown');
    expect(netnsVerdict(rec(path, { dev: NSFS, ino: 1 }), { kind: 'not-netns' }, () => view)).toBe('unknown'); // no mntns recorded
  });

  it('a path that names another namespace is gone; the same one is looked into (a freed number is reused)', () => {
    expect(netnsVerdict(rec(path, id), { kind: 'netns', dev: NSFS, ino: 4026532777 }, () => view)).toBe('gone');
    expect(netnsVerdict(rec(path, id), { kind: 'netns', dev: 9, ino: 4026532500 }, () => view)).toBe('gone');
    expect(netnsVerdict(rec(path, id), { kind: 'netns', dev: NSFS, ino: 4026532500 }, () => view)).toBe('look');
    expect(netnsVerdict(rec(path, id), { kind: 'netns', dev: NSFS, ino: 4026532777 }, () => other)).toBe('look');
    expect(netnsVerdict(rec(path), { kind: 'netns', dev: NSFS, ino: 4026532777 }, () => view)).toBe('look'); // no identity
  });

  it('/proc/<pid>/ns/net of an exited process is gone when /proc is ours and numbers pids as the ADD’s did', () => {
    const missing = { kind: 'missing', dirInSight: false } as const;
    expect(netnsVerdict(rec(proc, id), missing, () => view, 'vanished')).toBe('gone');
    expect(netnsVerdict(rec(proc, id), missing, () => view, 'present')).toBe('unknown');
    expect(netnsVerdict(rec(proc, id), missing, () => view, 'unknown')).toBe('unknown'); // /proc could not be read
    expect(netnsVerdict(rec(proc, id), missing, () => view)).toBe('unknown');
    expect(netnsVerdict(rec(proc, id), missing, () => other, 'vanished')).toBe('unknown'); // another pid namespace
    expect(netnsVerdict(rec(proc, id), missing, () => ({ ...view, procOwn: false }), 'vanished')).toBe('unknown'); // a /proc not ours
    // A reused pid: its /proc/<pid>/ns/net names that process's namespace, another one.
    expect(netnsVerdict(rec(proc, id), { kind: 'netns', dev: NSFS, ino: 4026531840 }, () => view)).toBe('gone');
    expect(netnsVerdict(rec(proc, id), { kind: 'netns', dev: NSFS, ino: 4026531840 }, () => other)).toBe('look');
    expect(netnsVerdict(rec(path, id), missing, () => view, 'vanished')).toBe('unknown'); // not a /proc path
  });

  it('a record without the identity (an older shim’s): the newer proofs only from the node’s own view', () => {
    const node: ReaderView = {
      mntns: { dev: NSFS, ino: 4026531832 },
      pidns: { dev: NSFS, ino: PROC_PID_INIT_INO },
      procOwn: true,
      initMntns: { dev: NSFS, ino: 4026531832 },
    };
    const missing = { kind: 'missing', dirInSight: false } as const;
    expect(netnsVerdict(rec(path), { kind: 'not-netns' }, () => node)).toBe('gone');
    expect(netnsVerdict(rec(proc), missing, () => node, 'vanished')).toBe('gone');
    // pid 1's mount namespace is not ours, or unreadable: a regular file proves nothing; /proc still numbers as the node's.
    expect(netnsVerdict(rec(path), { kind: 'not-netns' }, () => ({ ...node, initMntns: { dev: NSFS, ino: 1 } }))).toBe('unknown');
    expect(netnsVerdict(rec(path), { kind: 'not-netns' }, () => ({ ...node, initMntns: undefined }))).toBe('unknown');
    expect(netnsVerdict(rec(proc), missing, () => ({ ...node, initMntns: undefined }), 'vanished')).toBe('gone');
    // Not the initial pid namespace (a container, a kind node): nothing new is proven.
    const nested = { ...node, pidns: { dev: NSFS, ino: 4026532901 } };
    expect(netnsVerdict(rec(path), { kind: 'not-netns' }, () => nested)).toBe('unknown');
    expect(netnsVerdict(rec(proc), missing, () => nested, 'vanished')).toBe('unknown');
    expect(netnsVerdict(rec(proc), missing, () => ({ ...node, procOwn: false }), 'vanished')).toBe('unknown');
  });
  it('asks for the reader’s view only when a newer proof is at stake', () => {
    const never = () => {
      throw new Error('the view was read');
    };
    expect(netnsVerdict(rec(path, id), { kind: 'missing', dirInSight: true }, never)).toBe('gone');
    expect(netnsVerdict(rec(path, id), { kind: 'netns', dev: NSFS, ino: 4026532500 }, never)).toBe('look');
    expect(netnsVerdict(rec(path), { kind: 'netns', dev: NSFS, ino: 4026532777 }, never)).toBe('look');
    expect(netnsVerdict(rec(path, id), { kind: 'unreadable' }, never)).toBe('unknown');
  });
});

describe('procPidOf, sameView', () => {
  it('reads the pid of /proc/<pid>/ns/net and /proc/<pid>/task/<tid>/ns/net only', () => {
    expect(procPidOf('/proc/4242/ns/net')).toBe('4242');
    expect(procPidOf('/proc/4242/task/4243/ns/net')).toBe('4242');
    expect(procPidOf('/proc/self/ns/net')).toBeUndefined();
    expect(procPidOf('/proc/4242/ns/mnt')).toBeUndefined();
    expect(procPidOf('/run/netns/4242')).toBeUndefined();
  });
  it('needs the recorded namespace on the same nsfs device', () => {
    expect(sameView(path, id, view)).toBe(true);
    expect(sameView(path, { ...id, dev: 5 }, view)).toBe(false);
    expect(sameView(proc, { ...id, pidns: undefined }, view)).toBe(false);
    expect(sameView(proc, id, { ...other, pidns: view.pidns })).toBe(true); // another mount namespace, same pids
  });
});
