// `npm run image [-- flags]`: the node image, built here from Debian's archive alone (no registry):
//   1. the base (scripts/image/base.ts): mmdebstrap writes a bookworm root file system as a tarball, cached in
//      .cache/image/base-<key>.tar (the key covers the package list, the mmdebstrap options and the machine's
//      Debian sources; --fresh-base rebuilds it, CI starts without it);
//   2. `podman import` makes it the image localhost/ipam-shim-base:<key> (skipped when the store has it);
//   3. `podman build -f deploy/Containerfile --build-arg BASE=<that image>`: the Containerfile only adds
//      the arch's single executable (EXECUTABLES; run `npm run build` first) and the entrypoint.
// Each step is per architecture: the arm64 base is made by mmdebstrap --architectures=arm64 (its maintainer scripts
// run under qemu-user through binfmt_misc, which scripts/install-deps.sh registers), imported and built with
// --arch arm64. `--arch all` builds both under NAME-amd64 and NAME-arm64 and makes NAME a manifest list of the two:
// one image name for mixed node pools (push it with `podman manifest push --all NAME docker://NAME`).
//
//   --arch ARCH         amd64 (default), arm64, or all
//   --tag NAME          the image's name (default localhost/ipam-shim:<package.json version>); a NAME without a tag
//                       gets the version as its tag, e.g. registry.example/ipam-shim → registry.example/ipam-shim:0.2.0
//                       (then point your overlay's images: at it, docs/gitops.md); a release uses no other tag
//   --source-url URL    the org.opencontainers.image.source label (default: the checkout's origin remote)
//   --fresh-base        rebuild the base even when it is cached
//   --root DIR, --runroot DIR, --storage-driver NAME   a podman store other than the machine's default
//
// podman runs with its own containers.conf (CONTAINERS_CONF): `default_ulimits = []` (the sandbox lacks
// CAP_SYS_RESOURCE), runc, cgroupfs and a file events log (no systemd/journald here); see test/support/runtimes/podman.ts.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ARCHES, type Arch, baseKey, debianSources, mmdebstrapArgs } from './base.js';

export const ROOT = resolve(import.meta.dirname, '../..');
export const CACHE_DIR = join(ROOT, '.cache/image');
/** Each architecture's single executable, relative to ROOT (the Containerfile's EXECUTABLE build arg). */
export const EXECUTABLES: Record<Arch, string> = { amd64: 'dist/ipam-shim', arm64: 'dist/linux-arm64/ipam-shim' };
export const EXECUTABLE = join(ROOT, EXECUTABLES.amd64);
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
export const DEFAULT_TAG = `localhost/ipam-shim:${VERSION}`;

/** The image name a --tag means: its own tag when it has one, else package.json's version (a release's tag). */
export function imageName(tag: string | undefined, version = VERSION): string {
  if (tag === undefined) return `localhost/ipam-shim:${version}`;
  // A tag is what follows the last ':' after the last '/' (a registry's port is before it); a digest names itself.
  const last = tag.slice(tag.lastIndexOf('/') + 1);
  return last.includes(':') || tag.includes('@') ? tag : `${tag}:${version}`;
}

/** Runs podman with the given arguments (the caller chooses store and config); rejects on a non-zero exit. */
export type Podman = (args: string[]) => Promise<{ stdout: string }>;

export interface BuildOptions {
  podman: Podman;
  tag?: string;
  /** org.opencontainers.image.source (default: the checkout's origin remote, else the Containerfile's). */
  sourceUrl?: string;
  freshBase?: boolean;
  cacheDir?: string;
  /** The architecture to build (default amd64). */
  arch?: Arch;
  log?: (line: string) => void;
}

export interface BuildReport {
  tag: string;
  arch: Arch;
  baseTag: string;
  baseTar: string;
  /** Whether this run ran mmdebstrap (false: the cached tarball was used). */
  baseBuilt: boolean;
  sizes: { baseTar: number; baseImage: number; image: number };
  ms: { base: number; import: number; build: number };
}

/** Runs a program with an argv array; rejects with its stderr on failure. */
export function runTool(file: string, args: string[], env?: NodeJS.ProcessEnv, timeoutMs = 600_000): Promise<{ stdout: string; stderr: string }> {
  return new Promise((ok, fail) => {
    execFile(
      file,
      args,
      { env: env ? { ...process.env, ...env } : process.env, maxBuffer: 64 << 20, timeout: timeoutMs, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        if (err) fail(new Error(`${file} ${args.join(' ')}: ${String(stderr).trim() || err.message}`));
        else ok({ stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

/** The containers.conf podman needs on this kind of machine (root in a sandbox, cgroup v1, no systemd). */
export function containersConf(tmpDir: string): string {
  return [
    '[containers]',
    'default_ulimits = []',
    '',
    '[engine]',
    'runtime = "runc"',
    'cgroup_manager = "cgroupfs"',
    'events_logger = "file"',
    `tmp_dir = ${JSON.stringify(tmpDir)}`,
    '',
  ].join('\n');
}

/** The base tarball, from the cache or made now by mmdebstrap (written aside, then renamed: never half a file). */
async function baseTarball(
  cacheDir: string,
  fresh: boolean,
  arch: Arch,
  log: (l: string) => void,
): Promise<{ tar: string; key: string; built: boolean }> {
  const sources = debianSources();
  const key = baseKey(sources, arch);
  const tar = join(cacheDir, `base-${key}.tar`);
  if (!fresh && existsSync(tar)) return { tar, key, built: false };
  mkdirSync(cacheDir, { recursive: true });
  const work = mkdtempSync(join(cacheDir, '.mmdebstrap-'));
  try {
    const sourcesFile = join(work, 'debian.sources'); // mmdebstrap pastes a MIRROR that is a file into the chroot's sources
    writeFileSync(sourcesFile, sources);
    log(`image: mmdebstrap ${arch} ${key} from\n${sources.replace(/^/gm, '  ')}`);
    // Under emulation (arm64 here) mmdebstrap runs dpkg's maintainer scripts through qemu: allow it 30 minutes.
    await runTool('mmdebstrap', ['--quiet', ...mmdebstrapArgs(sourcesFile, join(work, 'base.tar'), arch)], undefined, 1_800_000);
    renameSync(join(work, 'base.tar'), tar);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return { tar, key, built: true };
}

async function imageSize(podman: Podman, ref: string): Promise<number> {
  return Number((await podman(['image', 'inspect', '--format', '{{.Size}}', ref])).stdout.trim());
}

/** git's answer in the checkout, or undefined (no git, not a checkout, no such remote). */
const git = (args: string[]) =>
  new Promise<string | undefined>((res) => execFile('git', ['-C', ROOT, ...args], (e, out) => res(e ? undefined : String(out).trim() || undefined)));

/** The build args behind the image's OCI labels (deploy/Containerfile): version, revision, source. */
async function labelArgs(sourceUrl?: string): Promise<string[]> {
  const revision = await git(['rev-parse', 'HEAD']);
  const source = sourceUrl ?? (await git(['remote', 'get-url', 'origin']));
  return [
    ...['--build-arg', `VERSION=${VERSION}`],
    ...(revision ? ['--build-arg', `REVISION=${revision}`] : []),
    ...(source ? ['--build-arg', `SOURCE=${source}`] : []),
  ];
}

/** Builds the image into the store `podman` uses. */
export async function buildImage(opts: BuildOptions): Promise<BuildReport> {
  const log = opts.log ?? (() => undefined);
  const tag = imageName(opts.tag);
  const arch = opts.arch ?? 'amd64';
  const executable = join(ROOT, EXECUTABLES[arch]);
  if (!existsSync(executable)) throw new Error(`${executable} is missing: run \`npm run build\` first`);
  const t0 = Date.now();
  const base = await baseTarball(opts.cacheDir ?? CACHE_DIR, opts.freshBase ?? false, arch, log);
  const t1 = Date.now();
  const baseTag = `localhost/ipam-shim-base:${base.key}`;
  const exists = await opts.podman(['image', 'exists', baseTag]).then(
    () => true,
    () => false,
  );
  if (!exists || base.built) {
    // An imported tarball has no configuration; PATH is the one debian:12-slim sets, where `ip`, `nft` and
    // `ebtables` are found.
    await opts.podman([
      'import',
      '--arch',
      arch,
      '--os',
      'linux',
      '--change',
      'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      base.tar,
      baseTag,
    ]);
  }
  const t2 = Date.now();
  const labels = await labelArgs(opts.sourceUrl);
  await opts.podman([
    'build',
    '--pull=never',
    '--platform',
    `linux/${arch}`,
    '--file',
    join(ROOT, 'deploy/Containerfile'),
    '--build-arg',
    `BASE=${baseTag}`,
    '--build-arg',
    `EXECUTABLE=${EXECUTABLES[arch]}`,
    ...labels,
    '--tag',
    tag,
    ROOT,
  ]);
  const t3 = Date.now();
  return {
    tag,
    arch,
    baseTag,
    baseTar: base.tar,
    baseBuilt: base.built,
    sizes: { baseTar: statSync(base.tar).size, baseImage: await imageSize(opts.podman, baseTag), image: await imageSize(opts.podman, tag) },
    ms: { base: t1 - t0, import: t2 - t1, build: t3 - t2 },
  };
}

export interface ManifestReport {
  /** The manifest list's name: one image name for every architecture. */
  tag: string;
  images: BuildReport[];
}

/**
 * Builds one image per architecture (NAME-amd64, NAME-arm64: the tag with the arch appended) and makes NAME a
 * manifest list holding them, so a node pulls the image of its own architecture.
 */
export async function buildManifest(opts: Omit<BuildOptions, 'arch'>, arches: Arch[] = Object.keys(ARCHES) as Arch[]): Promise<ManifestReport> {
  const tag = imageName(opts.tag);
  const images: BuildReport[] = [];
  for (const arch of arches) images.push(await buildImage({ ...opts, arch, tag: `${tag}-${arch}` }));
  // A list already under the name is replaced: `manifest create` refuses an existing one.
  await opts.podman(['manifest', 'rm', tag]).catch(() => undefined);
  await opts.podman(['manifest', 'create', tag]);
  for (const image of images) await opts.podman(['manifest', 'add', '--arch', image.arch, '--os', 'linux', tag, `containers-storage:${image.tag}`]);
  return { tag, images };
}

/** A Podman runner for the given global options, with its own containers.conf in a temp dir (removed by `close`). */
export function podmanWith(globalArgs: string[]): { podman: Podman; close: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'ipam-shim-image-'));
  mkdirSync(join(dir, 'tmp'));
  writeFileSync(join(dir, 'containers.conf'), containersConf(join(dir, 'tmp')));
  const env = { CONTAINERS_CONF: join(dir, 'containers.conf') };
  return {
    podman: (args) => runTool('podman', [...globalArgs, ...args], env),
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}

const MiB = (n: number) => `${(n / 1048576).toFixed(1)} MiB`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      tag: { type: 'string' },
      'source-url': { type: 'string' },
      'fresh-base': { type: 'boolean' },
      root: { type: 'string' },
      runroot: { type: 'string' },
      'storage-driver': { type: 'string' },
      arch: { type: 'string', default: 'amd64' },
    },
  });
  const arch = values.arch;
  if (arch !== 'all' && !Object.hasOwn(ARCHES, arch)) throw new Error(`--arch: ${arch} is not one of ${[...Object.keys(ARCHES), 'all'].join(', ')}`);
  const globalArgs = [
    ...(values.root ? ['--root', values.root] : []),
    ...(values.runroot ? ['--runroot', values.runroot] : []),
    ...(values['storage-driver'] ? ['--storage-driver', values['storage-driver']] : []),
  ];
  const { podman, close } = podmanWith(globalArgs);
  try {
    const opts = {
      podman,
      ...(values.tag ? { tag: values.tag } : {}),
      ...(values['source-url'] ? { sourceUrl: values['source-url'] } : {}),
      freshBase: values['fresh-base'] ?? false,
      log: (l: string) => console.error(l),
    };
    const list = arch === 'all' ? await buildManifest(opts) : undefined;
    for (const r of list?.images ?? [await buildImage({ ...opts, arch: arch as Arch })]) {
      console.log(
        `${r.tag} (${r.arch}): ${MiB(r.sizes.image)} (base ${r.baseTag}: ${MiB(r.sizes.baseImage)}, tarball ${MiB(r.sizes.baseTar)} in ${r.baseTar})`,
      );
      console.log(
        `base ${r.baseBuilt ? 'built' : 'cached'} ${(r.ms.base / 1000).toFixed(1)} s, import ${(r.ms.import / 1000).toFixed(1)} s, build ${(r.ms.build / 1000).toFixed(1)} s`,
      );
    }
    if (list)
      console.log(
        `${list.tag}: manifest list of ${list.images.map((i) => i.arch).join(', ')} (push: podman manifest push --all ${list.tag} docker://${list.tag})`,
      );
  } finally {
    close();
  }
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  main().catch((e: unknown) => {
    console.error(`image: ${(e as Error).message}`);
    process.exit(1);
  });
}
