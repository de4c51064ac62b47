// A file system that stops answering, for real: a FUSE mount whose server answers the kernel's INIT and then reads
// every request and never replies, as a hung NFS or sshfs server does. Any LOOKUP, GETATTR or READ under the mount
// blocks its caller in the kernel (request_wait_answer); once the server has read the request not even SIGKILL
// frees the caller until the connection goes. No libfuse: the server speaks /dev/fuse's protocol directly (the INIT
// reply is fuse_init_out of <linux/fuse.h>, 7.x) and mounts with util-linux's `mount -i -t fuse -o fd=N`, handing
// it the open /dev/fuse as fd 3. cleanup() kills the server (closing /dev/fuse aborts the connection: every blocked
// caller gets ENOTCONN) and detaches the mount. Root only.
import { execa, type ResultPromise } from 'execa';
import { existsSync } from 'node:fs';

const SERVER = `
const { openSync, readSync, writeSync } = require('node:fs');
const { spawnSync } = require('node:child_process');
const fd = openSync('/dev/fuse', 'r+');
const m = spawnSync('mount', ['-i', '-t', 'fuse', '-o', 'fd=3,rootmode=40000,user_id=0,group_id=0,allow_other', 'ipam-shim-hung', process.argv[1]],
  { stdio: ['ignore', 'inherit', 'inherit', fd] });
if (m.status !== 0) process.exit(3);
const buf = Buffer.alloc((1 << 20) + 4096);
for (;;) {
  readSync(fd, buf, 0, buf.length, null);
  if (buf.readUInt32LE(4) !== 26) continue; // FUSE_INIT; everything else is read and never answered
  const out = Buffer.alloc(16 + 64);
  out.writeUInt32LE(out.length, 0);
  out.writeBigUInt64LE(buf.readBigUInt64LE(8), 8);
  out.writeUInt32LE(7, 16);
  out.writeUInt32LE(Math.min(buf.readUInt32LE(44), 31), 20);
  out.writeUInt16LE(1, 32);
  out.writeUInt16LE(1, 34);
  out.writeUInt32LE(4096, 36);
  out.writeUInt32LE(1, 40);
  writeSync(fd, out);
  process.stdout.write('ready\\n');
}
`;

export interface HungMount {
  /** Lets every blocked caller go (ENOTCONN) and removes the mount. */
  cleanup: () => Promise<void>;
}

/** Whether a FUSE mount can be made here (root, /dev/fuse). */
export const canHangFuse = (): boolean => process.getuid?.() === 0 && existsSync('/dev/fuse');

/** Mounts a hung FUSE file system on `dir` (an existing directory). */
export async function hangFuse(dir: string): Promise<HungMount> {
  const server: ResultPromise = execa(process.execPath, ['-e', SERVER, dir], { reject: false, buffer: false, stdin: 'ignore' });
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
    cleanup: async () => {
      server.kill('SIGKILL');
      await server;
      await execa('umount', ['-l', dir], { reject: false });
    },
  };
}
