// A file system that stops answering, for real: a FUSE mount whose server answers the kernel's INIT and then reads
// every request and never replies, as a hung NFS or sshfs server does. Any LOOKUP, GETATTR or READ under the mount
// blocks its caller in the kernel (request_wait_answer); once the server has read the request not even SIGKILL
// frees the caller until the connection goes. No libfuse: the server speaks /dev/fuse's protocol directly (the INIT
// reply is fuse_init_out of <linux/fuse.h>, 7.x) and mounts with util-linux's `mount -i -t fuse -o fd=N`, handing
// it the open /dev/fuse as fd 3. cleanup() kills the server (closing /dev/fuse aborts the connection: every blocked
// caller gets ENOTCONN) and detaches the mount. Root only.
//
// With `tree` (hangFuse(dir, { tree })), the server answers the metadata requests (LOOKUP, GETATTR, OPENDIR,
// READDIR, OPEN, RELEASE[DIR], FLUSH; ENOSYS to the rest) for that tree, so listings and stat()s work and name
// regular files of plausible size, and it never answers a READ: what hangs is reading a file's content.
import { execa, type ResultPromise } from 'execa';
import { existsSync } from 'node:fs';

const SERVER = `
const { openSync, readSync, writeSync } = require('node:fs');
const { spawnSync } = require('node:child_process');
const tree = process.argv[2] ? JSON.parse(process.argv[2]) : undefined;
// nodes[id] = { dir: { name: id } } or { size }; the root is node 1.
const nodes = [undefined];
const add = (t) => {
  const id = nodes.length;
  nodes.push(undefined);
  if (typeof t === 'number') nodes[id] = { size: t };
  else {
    const dir = {};
    for (const [name, sub] of Object.entries(t)) dir[name] = add(sub);
    nodes[id] = { dir };
  }
  return id;
};
if (tree) add(tree);
const fd = openSync('/dev/fuse', 'r+');
const m = spawnSync('mount', ['-i', '-t', 'fuse', '-o', 'fd=3,rootmode=40000,user_id=0,group_id=0,allow_other', 'ipam-shim-hung', process.argv[1]],
  { stdio: ['ignore', 'inherit', 'inherit', fd] });
if (m.status !== 0) process.exit(3);
const buf = Buffer.alloc((1 << 20) + 4096);
const reply = (unique, error, body = Buffer.alloc(0)) => {
  const out = Buffer.alloc(16 + body.length);
  out.writeUInt32LE(out.length, 0);
  out.writeInt32LE(error, 4);
  out.writeBigUInt64LE(unique, 8);
  body.copy(out, 16);
  try { writeSync(fd, out); } catch {} // ENOENT: the request was interrupted meanwhile
};
// struct fuse_attr (88 bytes, protocol >= 7.9)
const attr = (id) => {
  const n = nodes[id];
  const a = Buffer.alloc(88);
  a.writeBigUInt64LE(BigInt(id), 0);
  a.writeBigUInt64LE(BigInt(n.dir ? 4096 : n.size), 8);
  a.writeBigUInt64LE(8n, 16);
  const now = BigInt(Math.floor(Date.now() / 1000) - 3600);
  for (const o of [24, 32, 40]) a.writeBigUInt64LE(now, o);
  a.writeUInt32LE(n.dir ? 0o40755 : 0o100600, 60);
  a.writeUInt32LE(n.dir ? 2 : 1, 64);
  a.writeUInt32LE(4096, 80);
  return a;
};
const ENOENT = -2, ENOSYS = -38;
for (;;) {
  readSync(fd, buf, 0, buf.length, null);
  const len = buf.readUInt32LE(0), op = buf.readUInt32LE(4), unique = buf.readBigUInt64LE(8), nodeid = Number(buf.readBigUInt64LE(16));
  if (op === 26) { // FUSE_INIT: fuse_init_out
    const out = Buffer.alloc(64);
    out.writeUInt32LE(7, 0);
    out.writeUInt32LE(Math.min(buf.readUInt32LE(44), 31), 4);
    out.writeUInt16LE(1, 16);
    out.writeUInt16LE(1, 18);
    out.writeUInt32LE(4096, 20);
    out.writeUInt32LE(1, 24);
    reply(unique, 0, out);
    process.stdout.write('ready\\n');
    continue;
  }
  if (!tree) continue; // everything after INIT is read and never answered
  if (op === 2 || op === 42 || op === 36) continue; // FORGET, BATCH_FORGET, INTERRUPT: no reply
  if (op === 15) { // READ: never answered (said, so a test knows the hang is there)
    process.stdout.write('read\\n');
    continue;
  }
  const node = nodes[nodeid];
  if (op === 1) { // LOOKUP: fuse_entry_out
    const name = buf.toString('utf8', 40, buf.indexOf(0, 40));
    const id = node && node.dir ? node.dir[name] : undefined;
    if (id === undefined) { reply(unique, ENOENT); continue; }
    const out = Buffer.alloc(40 + 88);
    out.writeBigUInt64LE(BigInt(id), 0);
    out.writeBigUInt64LE(60n, 16);
    out.writeBigUInt64LE(60n, 24);
    attr(id).copy(out, 40);
    reply(unique, 0, out);
  } else if (op === 3) { // GETATTR: fuse_attr_out
    const out = Buffer.alloc(16 + 88);
    out.writeBigUInt64LE(60n, 0);
    attr(nodeid).copy(out, 16);
    reply(unique, 0, out);
  } else if (op === 14 || op === 27) { // OPEN, OPENDIR: fuse_open_out
    reply(unique, 0, Buffer.alloc(16));
  } else if (op === 18 || op === 29 || op === 25) { // RELEASE, RELEASEDIR, FLUSH
    reply(unique, 0);
  } else if (op === 28 && node && node.dir) { // READDIR: fuse_dirents after fuse_read_in's offset
    const from = Number(buf.readBigUInt64LE(48)), size = buf.readUInt32LE(56);
    const entries = [['.', nodeid, 4], ['..', 1, 4], ...Object.entries(node.dir).map(([n, id]) => [n, id, nodes[id].dir ? 4 : 8])];
    const parts = [];
    let total = 0;
    for (let i = from; i < entries.length; i++) {
      const [name, id, type] = entries[i];
      const nb = Buffer.from(name);
      const d = Buffer.alloc(24 + Math.ceil(nb.length / 8) * 8);
      d.writeBigUInt64LE(BigInt(id), 0);
      d.writeBigUInt64LE(BigInt(i + 1), 8);
      d.writeUInt32LE(nb.length, 16);
      d.writeUInt32LE(type, 20);
      nb.copy(d, 24);
      if (total + d.length > size) break;
      parts.push(d);
      total += d.length;
    }
    reply(unique, 0, Buffer.concat(parts));
  } else {
    reply(unique, ENOSYS);
  }
  void len;
}
`;

export interface HungMount {
  /** Lets every blocked caller go (ENOTCONN) and removes the mount. */
  cleanup: () => Promise<void>;
  /** READ requests the server has taken (and not answered) so far. */
  reads: () => number;
}

/** A directory tree: a name maps to a directory (an object) or a regular file of that many bytes. */
export interface FuseTree {
  [name: string]: FuseTree | number;
}

/** Whether a FUSE mount can be made here (root, /dev/fuse). */
export const canHangFuse = (): boolean => process.getuid?.() === 0 && existsSync('/dev/fuse');

/**
 * Mounts a hung FUSE file system on `dir` (an existing directory). Without `tree` every request after INIT hangs;
 * with it, `tree` can be listed and stat()ed and opened, and only reading a file's content hangs.
 */
export async function hangFuse(dir: string, o: { tree?: FuseTree } = {}): Promise<HungMount> {
  const args = ['-e', SERVER, dir, ...(o.tree ? [JSON.stringify(o.tree)] : [])];
  const server: ResultPromise = execa(process.execPath, args, { reject: false, buffer: false, stdin: 'ignore' });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    server.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('ready')) resolve();
    });
    void server.then((r) => reject(new Error(`the FUSE server ended before INIT: exit ${r.exitCode}`)));
    setTimeout(() => reject(new Error('the FUSE server did not answer INIT within 10 s')), 10_000).unref();
  });
  return {
    reads: () => out.split('\n').filter((l) => l === 'read').length,
    cleanup: async () => {
      server.kill('SIGKILL');
      await server;
      await execa('umount', ['-l', dir], { reject: false });
    },
  };
}
