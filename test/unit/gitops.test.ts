// docs/gitops.md's kustomizations, rendered as written (kubectl kustomize, .deps/kubectl-1.36): each remote
// reference (github.com/example/ipam-shim//PATH?ref=vX.Y.Z) is replaced by a local copy of this checkout's deploy/
// standing in for the release, and the files beside the kustomization are the release's own (your list: a test
// list). Every variant must roll out the operator's image in every container (init containers included: a
// placeholder there never pulls, and the removal never finishes), the operator's settings merged into the
// release's, and each component's work; the route's list is its own ConfigMap, rendered by no overlay.
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

/**
 * The doc's kustomizations by their title line: "# clusters/prod/ipam-shim/kustomization.yaml (install)", and
 * "# clusters/prod/cni-configuration/kustomization.yaml (your list)" for the route's ConfigMap of its own.
 */
async function docOverlays(): Promise<Map<string, { path: string; text: string }>> {
  const md = await readFile(join(ROOT, 'docs/gitops.md'), 'utf8');
  const out = new Map<string, { path: string; text: string }>();
  for (const m of md.matchAll(/```yaml\n(# clusters\/prod\/([a-z-]+)\/kustomization\.yaml \(([^)]+)\)\n[\s\S]*?)```/g))
    out.set(m[3]!, { path: m[2]!, text: m[1]! });
  return out;
}
const overlay = async (name: string) => (await docOverlays()).get(name)?.text ?? '';

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ipam-shim-gitops-'));
  // The release, as `?ref=` would fetch it: deploy/ of this checkout.
  await cp(join(ROOT, 'deploy'), join(dir, 'release/deploy'), { recursive: true });
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Writes the doc's kustomization (remote references made local) with the files it names beside it, and renders it. */
async function render(name: string, text: string, files: Record<string, string> = {}): Promise<Obj[]> {
  const at = join(dir, 'clusters', name.replaceAll(/[^a-z]/g, '-'));
  await mkdir(at, { recursive: true });
  await writeFile(
    join(at, 'kustomization.yaml'),
    text.replaceAll(REMOTE, (_m, path: string) => `../../release/${path}`),
  );
  await writeFile(join(at, 'shim-config.json'), await readFile(join(ROOT, 'deploy/shim-config.json')));
  for (const [f, content] of Object.entries(files)) await writeFile(join(at, f), content);
  return renderKustomization(at);
}

const podSpec = (objects: Obj[]) => objects.find((o) => o.kind === 'DaemonSet')!.spec.template.spec as Obj;
const images = (objects: Obj[]) =>
  [...(podSpec(objects).initContainers ?? []), ...podSpec(objects).containers].map((c: Obj) => `${c.name}=${c.image}`);
const settings = (objects: Obj[]) => objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('ipam-shim-config-'))!;

/** Every container and init container runs the operator's image; the placeholder is nowhere. */
function expectOperatorImage(objects: Obj[], containers: string[]) {
  expect(images(objects)).toEqual(containers.map((c) => `${c}=${IMAGE}`));
  expect(JSON.stringify(objects)).not.toContain(PLACEHOLDER);
}

/** The removal init container reads the operator's merged settings (the hashed ConfigMap's name, its key). */
function expectMergedSettingsInRemoval(objects: Obj[]) {
  const cm = settings(objects);
  expect(cm.data['gc-mode']).toBe('apply');
  const env = (podSpec(objects).initContainers[0].env as Obj[]).find((e) => e.name === 'SHIM_CONFIG')!;
  expect(env.valueFrom.configMapKeyRef).toEqual({ name: cm.metadata.name, key: 'shim-config.json' });
}

describe.skipIf(!kubectlBin())('docs/gitops.md: your own overlay over a pinned release', () => {
  it("has the kustomizations (and the route's list of its own), every remote reference pinned to this version", async () => {
    const overlays = await docOverlays();
    expect([...overlays].map(([n, o]) => `${o.path} (${n})`)).toEqual([
      'ipam-shim (install)',
      "ipam-shim (Cilium's route)",
      'cni-configuration (your list)',
      'ipam-shim (removal)',
      "ipam-shim (Cilium's route removal)",
    ]);
    for (const [name, { text }] of [...overlays].filter(([n]) => n !== 'your list')) {
      const refs = [...text.matchAll(REMOTE)];
      expect(refs.length, name).toBeGreaterThan(0);
      for (const r of refs) expect(r[2], `${name}: ${r[0]}`).toBe(`v${V}`);
      expect(text, name).toContain(`newTag: "${V}"`);
    }
    // Your list is applied on its own: nothing of the release's, no ConfigMap of Cilium's rendered by an overlay.
    expect(await overlay('your list')).not.toMatch(REMOTE);
  });

  it("install: your image everywhere, your settings merged over the release's (gc-mode yours, interval the release's)", async () => {
    const objects = await render('install', await overlay('install'));
    expectOperatorImage(objects, ['agent']);
    const cm = settings(objects);
    expect(cm.data['gc-mode']).toBe('apply');
    expect(cm.data['interval-seconds']).toBe('30');
    expect(cm.data['shim-config.json']).toBe(await readFile(join(ROOT, 'deploy/shim-config.json'), 'utf8'));
    // The DaemonSet names the merged ConfigMap's hashed name.
    expect(JSON.stringify(podSpec(objects))).toContain(cm.metadata.name);
  });

  it("Cilium's route: your image in the binary's init container too, and no cni-configuration in the overlay", async () => {
    const objects = await render('route', await overlay("Cilium's route"));
    expectOperatorImage(objects, ['install-binary', 'agent']);
    expect(settings(objects).data['gc-mode']).toBe('apply');
    expect(podSpec(objects).containers[0].args).toContain('--no-install');
    // Not rendered here, so neither a prune of this overlay nor its deletion can delete Cilium's ConfigMap.
    expect(objects.filter((o) => o.metadata.name === 'cni-configuration')).toEqual([]);
  });

  it("your list: the ConfigMap Cilium names, with the release's labels and annotations, holding your list", async () => {
    const list = { cniVersion: '1.0.0', name: 'cilium', plugins: [{ type: 'cilium-cni' }, { type: 'ipam-shim', mine: true }] };
    const objects = await render('list', await overlay('your list'), { 'cni-config.json': `${JSON.stringify(list)}\n` });
    const release = await renderKustomization(join(dir, 'release/deploy/components/cilium-route/cni-configuration'));
    expect(objects).toHaveLength(1);
    const [cm] = objects as [Obj];
    expect(cm.kind).toBe('ConfigMap');
    // The release's metadata exactly: the name Cilium's values and the removal pods' volume name (no hash suffix),
    // its namespace, and the labels and annotations that keep ipam-shim's label clean-up, Flux and Argo CD from
    // deleting it.
    expect(release).toHaveLength(1);
    expect(cm.metadata).toEqual(release[0]!.metadata);
    expect(cm.metadata.name).toBe('cni-configuration');
    expect(Object.keys(cm.data)).toEqual(Object.keys(release[0]!.data));
    expect(JSON.parse(cm.data['cni-config']).plugins[1]).toMatchObject({ type: 'ipam-shim', mine: true });
  });

  it('removal: the removal pods run your image (init container included) with your settings, never the placeholder', async () => {
    const objects = await render('removal', await overlay('removal'));
    expectOperatorImage(objects, ['uninstall', 'removed']);
    const init = podSpec(objects).initContainers[0];
    expect(init.command).toEqual(['/usr/local/bin/ipam-shim', 'uninstall', '--purge', '--shim-config', '$(SHIM_CONFIG)']);
    expectMergedSettingsInRemoval(objects);
  });

  it("Cilium's route removal: the route's removal pods (your image, your settings) reading the ConfigMap, not rendering it", async () => {
    const objects = await render('route removal', await overlay("Cilium's route removal"));
    expectOperatorImage(objects, ['uninstall', 'removed']);
    const spec = podSpec(objects);
    const init = spec.initContainers[0];
    expect(init.command).toEqual([
      '/usr/local/bin/ipam-shim',
      'uninstall',
      '--keep-lists',
      '--source-list',
      '/etc/ipam-shim/cni-configuration/cni-config',
      '--wait',
      '--purge',
      '--shim-config',
      '$(SHIM_CONFIG)',
    ]);
    expect(init.volumeMounts).toContainEqual({
      name: 'cni-configuration',
      mountPath: '/etc/ipam-shim/cni-configuration',
      readOnly: true,
    });
    expectMergedSettingsInRemoval(objects);
    // Mounted by its fixed name (optional), never an object of this kustomization: its deletion leaves it.
    expect(spec.volumes.find((v: Obj) => v.name === 'cni-configuration').configMap).toEqual({ name: 'cni-configuration', optional: true });
    expect(objects.filter((o) => o.metadata.name === 'cni-configuration')).toEqual([]);
  });

  it('the pitfall the doc warns of: the image set by a patch leaves the removal on the placeholder', async () => {
    const removal = await overlay('removal');
    const patched = removal.replace(
      /images:\n(?: {2}.*\n)+/,
      `patches:\n  - patch: |-\n      apiVersion: apps/v1\n      kind: DaemonSet\n      metadata: {name: ipam-shim, namespace: kube-system}\n      spec: {template: {spec: {containers: [{name: agent, image: "${IMAGE}"}]}}}\n`,
    );
    expect(patched).not.toBe(removal);
    const objects = await render('pitfall', patched);
    expect(images(objects).find((i) => i.startsWith('uninstall='))).toBe(`uninstall=${PLACEHOLDER}:${V}`);
  });
});
