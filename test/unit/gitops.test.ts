// docs/gitops.md's kustomizations, rendered as written (kubectl kustomize, .deps/kubectl-1.36): each remote
// reference (github.com/example/ipam-shim//PATH?ref=vX.Y.Z) is replaced by a local copy of this checkout's deploy/
// standing in for the release, and the files beside the kustomization are the release's own. Every variant must roll
// out the operator's image in every container (init containers included: a placeholder there never pulls, and the
// removal never finishes), the operator's settings merged into the release's, and each component's work.
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectlBin, renderKustomization } from '../support/deploy/daemonset.js';
import { ROOT } from '../../scripts/image/build-image.js';

type Obj = Record<string, any>;
const V = (JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const REMOTE = /https:\/\/github\.com\/example\/ipam-shim\/\/([a-z/-]+)\?ref=(v[0-9.]+)/g;
const IMAGE = `registry.example/ipam-shim:${V}`;
const PLACEHOLDER = 'ghcr.io/example/ipam-shim';

/** The doc's kustomizations by their title line: "# clusters/prod/ipam-shim/kustomization.yaml (install)". */
async function docOverlays(): Promise<Map<string, string>> {
  const md = await readFile(join(ROOT, 'docs/gitops.md'), 'utf8');
  const out = new Map<string, string>();
  for (const m of md.matchAll(/```yaml\n(# clusters\/prod\/ipam-shim\/(?:cni-config\/)?kustomization\.yaml \(([^)]+)\)\n[\s\S]*?)```/g))
    out.set(m[2]!, m[1]!);
  return out;
}

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ipam-shim-gitops-'));
  // The release, as `?ref=` would fetch it: deploy/ of this checkout.
  await cp(join(ROOT, 'deploy'), join(dir, 'release/deploy'), { recursive: true });
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Writes the doc's kustomization (remote references made local) with its files beside it, and renders it. */
async function render(name: string, text: string): Promise<Obj[]> {
  const at = join(dir, 'clusters', name.replaceAll(/[^a-z]/g, '-'));
  await mkdir(at, { recursive: true });
  await writeFile(
    join(at, 'kustomization.yaml'),
    text.replaceAll(REMOTE, (_m, path: string) => `../../release/${path}`),
  );
  await writeFile(join(at, 'shim-config.json'), await readFile(join(ROOT, 'deploy/shim-config.json')));
  // The route's own component (the doc's "your list"), with a list standing for the one made on a node.
  await mkdir(join(at, 'cni-config'), { recursive: true });
  await writeFile(join(at, 'cni-config/kustomization.yaml'), (await docOverlays()).get('your list')!);
  const list = { cniVersion: '1.0.0', name: 'cilium', plugins: [{ type: 'cilium-cni' }, { type: 'ipam-shim', mine: true }] };
  await writeFile(join(at, 'cni-config/cni-config.json'), `${JSON.stringify(list)}\n`);
  return renderKustomization(at);
}

const podSpec = (objects: Obj[]) => objects.find((o) => o.kind === 'DaemonSet')!.spec.template.spec as Obj;
const images = (objects: Obj[]) =>
  [...(podSpec(objects).initContainers ?? []), ...podSpec(objects).containers].map((c: Obj) => `${c.name}=${c.image}`);

describe.skipIf(!kubectlBin())('docs/gitops.md: your own overlay over a pinned release', () => {
  it("has the three kustomizations (and the route's own component), every remote reference pinned to this version", async () => {
    const overlays = await docOverlays();
    expect([...overlays.keys()]).toEqual(['install', "Cilium's route", 'your list', 'removal']);
    for (const [name, text] of [...overlays].filter(([n]) => n !== 'your list')) {
      const refs = [...text.matchAll(REMOTE)];
      expect(refs.length, name).toBeGreaterThan(0);
      for (const r of refs) expect(r[2], `${name}: ${r[0]}`).toBe(`v${V}`);
      expect(text, name).toContain(`newTag: "${V}"`);
    }
  });

  it("install: your image everywhere, your settings merged over the release's (gc-mode yours, interval the release's)", async () => {
    const objects = await render('install', (await docOverlays()).get('install')!);
    expect(images(objects)).toEqual([`agent=${IMAGE}`]);
    const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('ipam-shim-config-'))!;
    expect(cm.data['gc-mode']).toBe('apply');
    expect(cm.data['interval-seconds']).toBe('30');
    expect(cm.data['shim-config.json']).toBe(await readFile(join(ROOT, 'deploy/shim-config.json'), 'utf8'));
    // The DaemonSet names the merged ConfigMap's hashed name.
    expect(JSON.stringify(podSpec(objects))).toContain(cm.metadata.name);
  });

  it("Cilium's route: your image in the binary's init container too, your list in cni-configuration", async () => {
    const objects = await render('route', (await docOverlays()).get("Cilium's route")!);
    expect(images(objects)).toEqual([`install-binary=${IMAGE}`, `agent=${IMAGE}`]);
    const list = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'cni-configuration')!;
    expect(JSON.parse(list.data['cni-config']).plugins[1]).toMatchObject({ type: 'ipam-shim', mine: true });
    expect(podSpec(objects).containers[0].args).toContain('--no-install');
  });

  it('removal: the removal pods run your image (init container included), never the placeholder', async () => {
    const objects = await render('removal', (await docOverlays()).get('removal')!);
    const spec = podSpec(objects);
    expect(spec.initContainers.map((c: Obj) => c.command.join(' '))).toEqual(['/usr/local/bin/ipam-shim uninstall']);
    for (const i of images(objects)) expect(i).toMatch(new RegExp(`=${IMAGE.replaceAll('.', '\\.')}$`));
    expect(JSON.stringify(objects)).not.toContain(PLACEHOLDER);
  });

  it('the pitfall the doc warns of: the image set by a patch leaves the removal on the placeholder', async () => {
    const removal = (await docOverlays()).get('removal')!;
    const patched = removal.replace(
      /images:\n(?: {2}.*\n)+/,
      `patches:\n  - patch: |-\n      apiVersion: apps/v1\n      kind: DaemonSet\n      metadata: {name: ipam-shim, namespace: kube-system}\n      spec: {template: {spec: {containers: [{name: agent, image: "${IMAGE}"}]}}}\n`,
    );
    expect(patched).not.toBe(removal);
    const objects = await render('pitfall', patched);
    expect(images(objects).find((i) => i.startsWith('uninstall='))).toBe(`uninstall=${PLACEHOLDER}:${V}`);
  });
});
