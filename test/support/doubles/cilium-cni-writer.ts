// cilium-agent's CNI-config writer on Cilium's route (Helm cni.customConf=true + cni.configMap), the part of
// cilium-agent that decides which list a node's runtime reads, and the kubelet's projection of the ConfigMap it reads
// from. What is copied (docs/testing.md, "cilium-agent's CNI-config writer"), read from Cilium's source
// (daemon/cmd/cni.go: startCNIConfWriter, installCNIConfFile, removeCNIConfFile, cleanupOtherCNI) and its chart's
// values (cni.configMap, cni.configMapKey "cni-config", cni.confFileMountPath "/tmp/cni-configuration"):
//   - at every start, once the agent is up, it reads the ConfigMap's key as mounted (read-cni-conf) and writes it as
//     write-cni-conf-when-ready (/etc/cni/net.d/05-cilium.conflist) with renameio: a temp file renamed over the
//     list, mode 0644; it does not watch the ConfigMap: a changed ConfigMap reaches the node's list at the next start;
//   - with cni-exclusive (the chart's default) it renames every other *.conf, *.conflist, *.json of the dir to
//     <name>.cilium_bak after writing, and removes its own list when it stops (its cleanup).
// The kubelet projects a ConfigMap volume as a directory whose keys are links into `..data`, itself a link to a
// timestamped directory swapped atomically on a change (what `projectConfigMap` writes); cilium-agent reads through
// them.
import { mkdir, readdir, readFile, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

let generation = 0;

/** The kubelet's projection of a ConfigMap's data into `dir` (keys as links into ..data, swapped atomically). */
export async function projectConfigMap(dir: string, data: Record<string, string>): Promise<void> {
  await mkdir(dir, { recursive: true });
  const stamp = `..${process.pid}_${++generation}`;
  await mkdir(join(dir, stamp));
  for (const [k, v] of Object.entries(data)) await writeFile(join(dir, stamp, k), v, { mode: 0o644 });
  await rm(join(dir, '..data_tmp'), { force: true });
  await symlink(stamp, join(dir, '..data_tmp'));
  await rename(join(dir, '..data_tmp'), join(dir, '..data'));
  // A key's link is made once and points through ..data: an update never leaves the key missing for a moment.
  for (const k of Object.keys(data)) if (!existsSync(join(dir, k))) await symlink(join('..data', k), join(dir, k));
  for (const n of await readdir(dir))
    if (n.startsWith('..') && n !== stamp && n !== '..data') await rm(join(dir, n), { recursive: true, force: true });
}

export class CiliumCniConfWriter {
  running = false;

  constructor(
    /** The ConfigMap as mounted (projectConfigMap's dir). */
    readonly configMapDir: string,
    /** The node's /etc/cni/net.d. */
    readonly confDir: string,
    readonly o: { key?: string; file?: string; exclusive?: boolean } = {},
  ) {}

  get listPath(): string {
    return join(this.confDir, this.o.file ?? '05-cilium.conflist');
  }

  /** cilium-agent starts: the ConfigMap's list becomes the node's. */
  async start(): Promise<string> {
    const text = await readFile(join(this.configMapDir, this.o.key ?? 'cni-config'), 'utf8');
    const tmp = join(this.confDir, `.${this.o.file ?? '05-cilium.conflist'}.renameio-tmp`);
    await writeFile(tmp, text, { mode: 0o644 });
    await rename(tmp, this.listPath);
    if (this.o.exclusive ?? true)
      for (const n of await readdir(this.confDir))
        if (n !== (this.o.file ?? '05-cilium.conflist') && /\.(conf|conflist|json)$/.test(n))
          await rename(join(this.confDir, n), join(this.confDir, `${n}.cilium_bak`));
    this.running = true;
    return text;
  }

  /** cilium-agent stops: with cni-exclusive its list goes with it. */
  async stop(): Promise<void> {
    if ((this.o.exclusive ?? true) && this.running) await unlink(this.listPath).catch(() => undefined);
    this.running = false;
  }

  async restart(): Promise<string> {
    await this.stop();
    return this.start();
  }
}
