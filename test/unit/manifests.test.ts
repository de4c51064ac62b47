// Every shipped variant as `kubectl kustomize` (Kubernetes 1.36, Debian) renders it, checked against Kubernetes'
// own schema of its API types (test/support/deploy/k8s-schema.ts: client-go 0.36.4's, from Debian), offline; and the
// variants' own promises: Cilium's route runs an agent that never installs and a ConfigMap that is install
// --print's list; the removal path runs `uninstall` only.
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../scripts/image/build-image.js';
import { parseAgentArgs } from '../../src/cli/agent.js';
import { parseShimConfig } from '../../src/cli/install.js';
import { renderConflist } from '../../src/install/conflist.js';
import { commandLine, daemonSetView, kubectlBin, renderKustomization } from '../support/deploy/daemonset.js';
import { clientGoDir, K8sSchema } from '../support/deploy/k8s-schema.js';

type Obj = Record<string, any>;
/** The variants that render the DaemonSet. */
const DS_VARIANTS = ['deploy', 'overlays/uninstall', 'overlays/cilium-route', 'overlays/cilium-route-uninstall'];
/** And Cilium's ConfigMap, applied on its own. */
const VARIANTS = [...DS_VARIANTS, 'deploy/components/cilium-route/cni-configuration'];
// AKS's 05-cilium.conflist (cilium-cni with delegated IPAM: azure-ipam), as test/e2e/install.test.ts has it.
const AKS_CILIUM =
  '{\n\t"cniVersion": "0.3.1",\n\t"name": "cilium",\n\t"plugins": [\n\t\t{\n\t\t\t"type": "cilium-cni",\n\t\t\t"ipam": {\n\t\t\t\t"type": "azure-ipam"\n\t\t\t},\n\t\t\t"enable-debug": true,\n\t\t\t"log-file": "/var/log/cilium-cni.log"\n\t\t}\n\t]\n}\n';

const missing = [
  ...(kubectlBin() ? [] : ['kubectl 1.36 (.deps/kubectl-1.36)']),
  ...(clientGoDir() ? [] : ["client-go's schema (.deps/k8s-client-go)"]),
];
if (missing.length > 0 && process.env.CI === 'true') throw new Error(`CI must have ${missing.join(', ')}: scripts/install-deps.sh`);
if (missing.length > 0) console.warn(`skipping the manifest checks: missing ${missing.join(', ')} (scripts/install-deps.sh)`);

describe.skipIf(missing.length > 0)("the rendered manifests against Kubernetes' schema (1.36)", () => {
  let schema: K8sSchema;
  const rendered = new Map<string, Obj[]>();
  beforeAll(async () => {
    schema = await K8sSchema.load();
    for (const v of VARIANTS) rendered.set(v, await renderKustomization(v));
  });

  it.each(VARIANTS)('%s: every object is a built-in kind and every field one its type declares', (variant) => {
    const report = schema.validate(rendered.get(variant)!);
    console.log(`${variant}: validated ${report.validated.join(', ')}; skipped ${report.skipped.join(', ') || 'none'}`);
    expect(report.errors).toEqual([]);
    expect(report.skipped).toEqual([]);
    // Cilium's ConfigMap is rendered only by its own kustomization, never by an overlay (`delete -k` of one
    // deletes exactly what it renders).
    expect(report.validated.map((v) => v.split(' ')[0]).sort()).toEqual(
      variant === 'deploy/components/cilium-route/cni-configuration' ? ['ConfigMap'] : ['ConfigMap', 'DaemonSet'],
    );
  });

  it("deploy/monitoring (as `kubectl apply -k` renders it): the dashboard's ConfigMap checked; the operators' kinds are CRDs the core schema does not hold: skipped, and said so", async () => {
    for (const [dir, crds] of [
      ['deploy/monitoring', 3],
      ['deploy/monitoring/azure', 1],
    ] as const) {
      const objects = await renderKustomization(dir);
      const report = schema.validate(objects);
      console.log(`${dir}: skipped ${report.skipped.join(', ')}`);
      expect(report.errors).toEqual([]);
      expect(report.skipped.length, dir).toBe(crds);
      expect(objects.length - crds, dir).toBe(dir === 'deploy/monitoring' ? 1 : 0);
      for (const s of report.skipped) expect(s).toMatch(/^(PodMonitor|PrometheusRule) .*monitoring\.coreos\.com\/v1: not a built-in kind/);
    }
  });

  it('fails a manifest with a misspelt field, a field in the wrong place and a scalar of the wrong kind, naming each', () => {
    const bad = structuredClone(rendered.get('deploy')!);
    const ds = bad.find((d) => d.kind === 'DaemonSet')!;
    const c = ds.spec.template.spec.containers[0];
    c.securityContext.readOnlyRootFileSystem = c.securityContext.readOnlyRootFilesystem;
    delete c.securityContext.readOnlyRootFilesystem;
    c.imagePulPolicy = 'IfNotPresent';
    ds.spec.template.spec.volumes[0].hostPath.readOnly = true;
    ds.spec.template.spec.terminationGracePeriodSeconds = '45';
    const report = schema.validate(bad);
    console.log(`a misspelt manifest:\n${report.errors.join('\n')}`);
    expect(report.errors.map((e) => e.replace(/ \(the type has .*\)$/, '')).sort()).toEqual([
      'DaemonSet ipam-shim: .spec.template.spec.containers[0].imagePulPolicy: unknown field',
      'DaemonSet ipam-shim: .spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem: unknown field',
      'DaemonSet ipam-shim: .spec.template.spec.terminationGracePeriodSeconds: "45" is not a numeric',
      'DaemonSet ipam-shim: .spec.template.spec.volumes[0].hostPath.readOnly: unknown field',
    ]);
    expect(report.errors.find((e) => e.includes('imagePulPolicy'))).toContain('imagePullPolicy');
  });
});

describe.skipIf(!kubectlBin())('the image name', () => {
  it("set once in deploy/kustomization.yaml's images:, is the image of every container of every variant", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'image-name-'));
    try {
      await cp(join(ROOT, 'deploy'), join(dir, 'deploy'), { recursive: true });
      await cp(join(ROOT, 'overlays'), join(dir, 'overlays'), { recursive: true });
      const k = join(dir, 'deploy/kustomization.yaml');
      const text = await readFile(k, 'utf8');
      const edited = text
        .replace('newName: ghcr.io/example/ipam-shim', 'newName: registry.example/team/ipam-shim')
        .replace(/newTag: "[^"]*"/, 'newTag: "9.9.9"');
      expect(edited).not.toBe(text);
      await writeFile(k, edited);
      for (const v of DS_VARIANTS) {
        const ds = (await renderKustomization(join(dir, v))).find((d) => d.kind === 'DaemonSet')!;
        const spec = ds.spec.template.spec;
        const images = [...(spec.initContainers ?? []), ...spec.containers].map((c: Obj) => `${c.name} ${c.image}`);
        expect(images.length, v).toBeGreaterThan(0);
        for (const i of images) expect(i, v).toMatch(/ registry\.example\/team\/ipam-shim:9\.9\.9$/);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!kubectlBin())("overlays/cilium-route: Cilium's route", () => {
  let docs: Obj[];
  let dir: string;
  beforeAll(async () => {
    docs = [
      ...(await renderKustomization('overlays/cilium-route')),
      ...(await renderKustomization('deploy/components/cilium-route/cni-configuration')),
    ];
    dir = await mkdtemp(join(tmpdir(), 'cilium-route-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('ships as cni-config the list `install --print --shim-config "$(cat deploy/shim-config.json)"` makes of AKS\'s cilium conflist', async () => {
    await writeFile(join(dir, '05-cilium.conflist'), AKS_CILIUM);
    const shimKeys = parseShimConfig(await readFile(join(ROOT, 'deploy/shim-config.json'), 'utf8'));
    const printed = await renderConflist(dir, shimKeys);
    const cm = docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === 'cni-configuration')!;
    expect(
      cm.data['cni-config'],
      'regenerate: ipam-shim install --print --shim-config "$(cat deploy/shim-config.json)" > deploy/components/cilium-route/cni-configuration/cni-config.json',
    ).toBe(printed.text?.endsWith('\n') ? printed.text : `${printed.text}\n`);
  });

  it('runs the agent with --no-install on the list Cilium writes, and only install --binary-only before it', () => {
    const ds = docs.find((d) => d.kind === 'DaemonSet')!;
    const cms = docs.filter((d) => d.kind === 'ConfigMap');
    const agent = commandLine(daemonSetView(ds, 'agent').container, cms, '10.224.0.4');
    const { settings, install } = parseAgentArgs(agent.slice(2));
    expect(install).toBeUndefined();
    expect(settings.entryAt).toEqual({ conflist: '/etc/cni/net.d/05-cilium.conflist' });
    expect(ds.spec.template.spec.initContainers.map((c: Obj) => [c.name, c.command])).toEqual([
      ['install-binary', ['/usr/local/bin/ipam-shim', 'install', '--binary-only']],
    ]);
  });
});

describe.skipIf(!kubectlBin())("Cilium's cni-configuration ConfigMap: nothing of ipam-shim's deletes it (issue 43)", () => {
  it('is no resource of any overlay (delete -k), carries no ipam-shim label (label clean-up) and is protected from Flux and Argo CD prunes', async () => {
    for (const v of DS_VARIANTS)
      expect(
        (await renderKustomization(v)).filter((d) => d.metadata.name === 'cni-configuration').map((d) => d.kind),
        v,
      ).toEqual([]);
    const [cm, ...rest] = await renderKustomization('deploy/components/cilium-route/cni-configuration');
    expect(rest).toEqual([]);
    expect(cm!.metadata).toMatchObject({
      name: 'cni-configuration',
      namespace: 'kube-system',
      annotations: { 'kustomize.toolkit.fluxcd.io/prune': 'disabled', 'argocd.argoproj.io/sync-options': 'Prune=false,Delete=false' },
    });
    // The documented clean-up of old ipam-shim ConfigMaps selects app.kubernetes.io/name=ipam-shim.
    expect(cm!.metadata.labels['app.kubernetes.io/name']).not.toBe('ipam-shim');
    expect(Object.values(cm!.metadata.labels)).not.toContain('ipam-shim');
    for (const d of await renderKustomization('overlays/cilium-route'))
      expect(d.metadata.labels?.['app.kubernetes.io/name'], `${d.kind} ${d.metadata.name}`).toBe('ipam-shim');
  });

  it("the removal for Cilium's route edits no list, mounts the ConfigMap optionally and waits; the default route's purges", async () => {
    const route = (await renderKustomization('overlays/cilium-route-uninstall')).find((d) => d.kind === 'DaemonSet')!;
    const cms = (await renderKustomization('overlays/cilium-route-uninstall')).filter((d) => d.kind === 'ConfigMap');
    const view = daemonSetView(route, 'uninstall');
    const cmd = commandLine(view.container, cms, '10.224.0.4');
    expect(cmd.slice(0, 8)).toEqual([
      '/usr/local/bin/ipam-shim',
      'uninstall',
      '--keep-lists',
      '--source-list',
      '/etc/ipam-shim/cni-configuration/cni-config',
      '--wait',
      '--purge',
      '--shim-config',
    ]);
    expect(JSON.parse(cmd[8]!)).toEqual(JSON.parse(await readFile(join(ROOT, 'deploy/shim-config.json'), 'utf8')));
    expect(view.mounts.map((m) => [m.mountPath, m.readOnly])).toEqual([
      ['/opt/cni/bin', false],
      ['/etc/cni/net.d', true],
      ['/var/lib/cni', false],
      ['/var/log', false],
      ['/etc/ipam-shim/cni-configuration', true],
    ]);
    expect(view.mounts.at(-1)!.volume).toEqual({ name: 'cni-configuration', configMap: { name: 'cni-configuration', optional: true } });
    const plain = (await renderKustomization('overlays/uninstall')).find((d) => d.kind === 'DaemonSet')!;
    expect(commandLine(daemonSetView(plain, 'uninstall').container, cms, '10.224.0.4').slice(0, 5)).toEqual([
      '/usr/local/bin/ipam-shim',
      'uninstall',
      '--purge',
      '--shim-config',
      cmd[8],
    ]);
  });
});
