// Doctor's conflist check: the conflists and the shim's place in them, and its delegate against the allocator's ipam.
import { dirname } from 'node:path';
import { isObject } from '../cni/json.js';
import { CniError } from '../cni/errors.js';
import { holdsShim } from '../cni/config.js';
import { allocatorOf, ANCHOR_TYPE, confDirProblem, conflistFiles, readNetworkConfig, ShimConflistMissing } from '../conflist.js';
import { type DoctorCheck, type Finding, list, type NodeView } from '../contract/doctor-check.js';
import { anyShim, ciliumConfig, describeConfig, scanConfDir } from './conf-dir.js';
import { typeOf } from './ipam-config.js';

const NAME = 'conflist';

function sameJson(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && sameJson(a[k], b[k]));
  }
  return a === b;
}

/**
 * No shim conflist: why, said plainly when cilium-agent has written no conflist yet. A file that does not parse
 * may be cilium's or the shim's: then it leads (with its parse error), and the missing cilium-cni conflist follows.
 */
async function missingFindings(node: NodeView): Promise<Finding[]> {
  const e = node.why;
  const skipped = "the checks that need the shim's network are skipped";
  const plain = e instanceof ShimConflistMissing && !node.conflist && !(await confDirProblem(node.confDir));
  const scan = plain ? await scanConfDir(node.confDir) : undefined;
  const why = `${e instanceof CniError ? e.msg : e.message}${e instanceof CniError && e.details ? ` (${e.details})` : ''}`;
  if (scan && !ciliumConfig(scan) && !anyShim(scan)) {
    const there = scan.configs.length ? `configs there: ${list(scan.configs.map(describeConfig))}` : 'no network config there';
    return [
      {
        check: NAME,
        verdict: 'problem',
        summary: scan.unreadable.length
          ? `${why}, and no cilium-cni conflist that parses (${there}): ${skipped}`
          : `no cilium-cni conflist in ${node.confDir} (${there}): ${skipped}`,
        fix: `${scan.unreadable.length ? 'fix or remove the file that does not parse; ' : ''}cilium-agent writes its conflist when it runs on this node: check that it does; the ipam-shim agent (or ipam-shim install --conf-dir ${node.confDir}) then chains the shim after cilium-cni. Elsewhere: --conf-dir DIR, or --conflist PATH`,
      },
    ];
  }
  const cilium = scan && ciliumConfig(scan);
  // cilium-cni with no IPAM plugin in its entry allocates through cilium-agent (cluster-pool, multi-pool,
  // kubernetes): no DaemonSet goes here, and failure 4 is the pool's (README's table, docs/reserved.md).
  const anchor = cilium?.list.plugins.find((p) => typeOf(p) === ANCHOR_TYPE);
  if (cilium && !anyShim(scan) && isObject(anchor) && typeOf(anchor.ipam) === undefined)
    return [
      {
        check: NAME,
        verdict: 'skipped',
        summary: `${cilium.path}: cilium-cni allocates through cilium-agent (no IPAM plugin in its entry: cluster-pool, multi-pool or kubernetes IPAM), and no list chains the shim: its per-node checks do not apply`,
        fix: "the pool decides which addresses pods get: run `ipam-shim plan` (the cluster's Helm values and CiliumNodes) before scaling; it names the node CIDRs that collide with a reserved subnet, the nodes already on one, and the list that avoids them. The refusal at ADD (code 100) fires only where the shim is chained: plan's first step chains it here with reservedCIDRs, so a colliding node CIDR fails at its first pod instead of black-holing replies (docs/reserved.md)",
      },
    ];
  const holds = cilium && !anyShim(scan) ? `: ${cilium.path} holds cilium-cni without the shim's entry` : '';
  return [
    {
      check: NAME,
      verdict: 'problem',
      summary: `${why}${holds}: ${skipped}`,
      fix: `ipam-shim install --conf-dir ${node.confDir} (chains the shim after cilium-cni), or name the conflist: --conflist PATH / --network NAME`,
    },
  ];
}

export const conflistCheck: DoctorCheck = {
  name: NAME,
  withoutNetwork: missingFindings,
  async run(net) {
    const name = this.name;
    const out: Finding[] = [];
    const dir = dirname(net.shim.path);
    // The runtime reads the first config only (containerd's go-cni loads one and stops; CRI-O skips what it cannot
    // parse): a broken first file is a problem (the installed check says what it costs), a broken later one is
    // never read, so it is named, not a problem.
    const [first, ...later] = (await conflistFiles(dir)).map((f) => {
      try {
        readNetworkConfig(f);
        return undefined;
      } catch (e) {
        return { f, why: e instanceof CniError && e.details ? e.details : (e as Error).message };
      }
    });
    if (first)
      out.push({
        check: name,
        verdict: 'problem',
        summary: `${first.f} is not a valid network config: ${first.why}`,
        fix: 'fix or remove the file: the runtime uses the first config in the directory and cannot parse this one',
      });
    const ignored = later.filter((x) => x !== undefined).map((x) => `${x.f} (${x.why})`);
    if (ignored.length)
      out.push({
        check: name,
        verdict: 'ok',
        summary: `configs that do not parse, never read by the runtime (it uses the first in ${dir}): ${list(ignored)}`,
      });
    // Which file the runtime uses, and whether it holds the shim: the installed check (installed.ts).
    const plugins = net.shim.list.plugins as unknown[];
    const shims = plugins.filter(holdsShim).length;
    if (shims > 1)
      out.push({
        check: name,
        verdict: 'problem',
        summary: `${shims} plugin entries in ${net.shim.path} name ipam-shim`,
        fix: 'keep one (ipam-shim install puts exactly one after cilium-cni)',
      });

    const types = plugins.map((p) => typeOf(p) ?? '?');
    if (net.conf.placement === 'chained') {
      const i = net.shim.index;
      const ciliumAt = types.indexOf(ANCHOR_TYPE);
      const prev = plugins[i - 1];
      const alloc = allocatorOf(plugins, i);
      if (i === 0) {
        out.push({
          check: name,
          verdict: 'problem',
          summary: 'the shim is the first plugin: it never gets a prevResult, every ADD fails (code 7)',
          fix: 'list it right after cilium-cni (ipam-shim install does)',
        });
      } else if (ciliumAt >= 0 && ciliumAt !== i - 1) {
        out.push({
          check: name,
          verdict: 'warn',
          summary: `the shim is plugin ${i} (${types.join(' → ')}), not right after cilium-cni`,
          fix: 'run ipam-shim install: it moves the entry right after cilium-cni',
        });
      } else if (ciliumAt < 0 && !isObject(alloc?.ipam)) {
        out.push({
          check: name,
          verdict: 'warn',
          summary: `the plugin before the shim (${typeOf(prev)}) allocates no addresses`,
          fix: 'chain the shim after the plugin that allocates (cilium-cni)',
        });
      } else {
        out.push({ check: name, verdict: 'ok', summary: `chained after ${typeOf(prev)} in ${net.shim.path} (${types.join(' → ')})` });
      }
      const ipam = alloc?.ipam;
      const delegate = net.conf.settings.delegate;
      const allocType = typeOf(alloc);
      if (!isObject(ipam)) {
        if (!delegate)
          out.push({
            check: name,
            verdict: 'warn',
            summary: 'no "delegate" and no IPAM config to mirror',
            fix: 'set "delegate" to the IPAM config cilium-cni uses',
          });
      } else if (!delegate) {
        out.push({
          check: name,
          verdict: 'warn',
          summary: `no "delegate": GC, STATUS and agent IPs cannot reach ${typeOf(ipam)}`,
          fix: `set "delegate" to ${allocType}'s ipam config: ${JSON.stringify(ipam)} (ipam-shim install does this by default)`,
        });
      } else if (delegate.type !== ipam.type) {
        out.push({
          check: name,
          verdict: 'problem',
          summary: `delegate is ${delegate.type} but ${allocType} allocates with ${String(ipam.type)}`,
          fix: `set "delegate" to ${JSON.stringify(ipam)}: GC would release through the wrong plugin`,
        });
      } else if (!sameJson(delegate, ipam)) {
        const keys = [...new Set([...Object.keys(delegate), ...Object.keys(ipam)])].filter((k) => !sameJson(delegate[k], ipam[k]));
        out.push({
          check: name,
          verdict: 'warn',
          summary: `delegate and ${allocType}'s ipam differ in ${keys.join(', ')}`,
          fix: `make "delegate" equal to ${JSON.stringify(ipam)}`,
        });
      } else {
        out.push({ check: name, verdict: 'ok', summary: `delegate matches ${allocType}'s IPAM config (${delegate.type})` });
      }
    } else {
      const host = plugins[net.shim.index];
      out.push({
        check: name,
        verdict: 'ok',
        summary: `in the IPAM slot of ${typeOf(host)} in ${net.shim.path}, wrapping ${net.conf.settings.delegate?.type}`,
      });
    }
    return out;
  },
};
