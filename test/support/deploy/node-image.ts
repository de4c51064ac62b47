// The node image for tests that run it (test/image, test/node): the prerequisites (failing under CI=true instead of
// skipping) and `npm run image`'s buildImage into a PodmanBed's private store (the mmdebstrap base cached in
// .cache/image/, so several suites in one run build it once).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type BuildReport, buildImage, buildManifest, CACHE_DIR, ROOT } from '../../../scripts/image/build-image.js';
import { rootOrSkip, uid } from '../net/netns.js';
import { hasPodman, type PodmanBed } from '../runtimes/podman.js';

/** Root, podman, mmdebstrap and the built executable (plus `extra`: name → present); with CI=true a missing one fails. */
export function nodeImagePrerequisites(what: string, extra: Record<string, boolean> = {}): boolean {
  if (!rootOrSkip()) return false;
  const missing = [
    ...(hasPodman() ? [] : ['podman']),
    ...(existsSync('/usr/bin/mmdebstrap') ? [] : ['mmdebstrap (scripts/install-deps.sh)']),
    ...(existsSync(join(ROOT, 'dist/ipam-shim')) ? [] : ['dist/ipam-shim (npm run build)']),
    ...Object.entries(extra).flatMap(([name, ok]) => (ok ? [] : [name])),
  ];
  if (missing.length === 0) return true;
  if (process.env.CI === 'true') throw new Error(`CI must have ${missing.join(', ')}`);
  console.warn(`skipping ${what}: missing ${missing.join(', ')}`);
  return false;
}

const bedPodman = (bed: PodmanBed) => async (args: string[]) => ({ stdout: String((await bed.podman(args, { timeoutMs: 600_000 })).stdout) });

function logReport(label: string, report: BuildReport): void {
  console.log(
    `${label}: ${report.tag} (${report.arch}) ${(report.sizes.image / 1048576).toFixed(1)} MiB, base ${(report.sizes.baseImage / 1048576).toFixed(1)} MiB ` +
      `(${report.baseBuilt ? 'built by mmdebstrap' : `cached in ${CACHE_DIR}`}); base ${report.ms.base} ms, import ${report.ms.import} ms, build ${report.ms.build} ms`,
  );
}

/** Builds the image into the bed's store under a unique tag; logs its size and timings under `label`. */
export async function buildTestImage(bed: PodmanBed, label: string): Promise<string> {
  const report = await buildImage({ podman: bedPodman(bed), tag: `localhost/ipam-shim-test:${uid(8)}` });
  logReport(label, report);
  return report.tag;
}

/** `npm run image -- --arch all` into the bed's store: the manifest list's name and each arch's image. */
export async function buildTestManifest(bed: PodmanBed, label: string): Promise<{ list: string; images: BuildReport[] }> {
  const t0 = Date.now();
  const { tag, images } = await buildManifest({ podman: bedPodman(bed), tag: `localhost/ipam-shim-test:${uid(8)}` });
  for (const r of images) logReport(label, r);
  console.log(`${label}: manifest list ${tag}, total ${Date.now() - t0} ms`);
  return { list: tag, images };
}
