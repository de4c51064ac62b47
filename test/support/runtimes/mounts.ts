// Lazily unmounts every mount at or below a directory, deepest first: runtimes (podman, containerd) leave
// overlay and bind mounts under their roots, and the directory cannot be removed while they stay.
import { readFile } from 'node:fs/promises';
import { execa } from 'execa';

export async function unmountBelow(dir: string): Promise<void> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  const targets = info
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((t): t is string => !!t && (t === dir || t.startsWith(`${dir}/`)))
    .map((t) => t.replace(/\\040/g, ' '))
    .sort((a, b) => b.length - a.length);
  for (const t of targets) await execa('umount', ['-l', t], { reject: false });
}
