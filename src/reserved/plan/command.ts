// `ipam-shim plan`, the reserved fix's command (reservedFix.commands, loaded only when it runs): which node CIDRs
// of a Cilium cluster-pool (or of each multi-pool pool) collide with reserved subnets (pool.ts), from flags or from
// the files an operator has (inputs.ts, read.ts, request.ts): Helm values, CiliumNodes, CiliumPodIPPools, Azure
// subnets. The text is render.ts's.
import { planPool, planToJson } from './pool.js';
import { CLUSTER_POOL, InputError } from './inputs.js';
import { FitError } from './fit.js';
import { PlanRequestError, type PlanSources, planInputOf, requestOf } from './request.js';
import { indent, renderInputs, renderPlan, reservedNames } from './render.js';
import { type Command, type CommandOutput, asUsage, parseArgv, UsageError } from '../../contract/command.js';
import { shown } from '../../terminal.js';

const USAGE = `ipam-shim plan [--values FILE] [--ciliumnodes FILE] [--ippools FILE] [--azure-subnets FILE]…
              [--pool CIDR[,CIDR…]] [--node-mask N] [--node-mask-v6 N] [--reserved CIDR[,CIDR…]] [--allocated K] [--nodes N] [--json]

  FILE is a path, or - for stdin (one input at a time); YAML or JSON, as the tools print it. Cilium's defaults
  fill in what no input says: 10.0.0.0/8 and 24 (IPv6: fd00::/104 and 120), but a mask no input gives is the
  CiliumNodes' own, and a mask or list the node CIDRs they hold contradict is refused (exit 2).`;

const OPTIONS = {
  pool: { type: 'string', multiple: true },
  'node-mask': { type: 'string' },
  'node-mask-v6': { type: 'string' },
  reserved: { type: 'string', multiple: true },
  allocated: { type: 'string' },
  nodes: { type: 'string' },
  values: { type: 'string', multiple: true },
  ciliumnodes: { type: 'string', multiple: true },
  ippools: { type: 'string', multiple: true },
  'azure-subnets': { type: 'string', multiple: true },
} as const;

export const planCommand: Command = {
  name: 'plan',
  summary: 'which cluster-pool node CIDRs collide with reserved subnets, and how many nodes fit before the first',
  usage: USAGE,
  options: OPTIONS,
  flagHelp: {
    values: {
      value: 'FILE',
      text: "Cilium's Helm values (ipam.mode, ipam.operator.clusterPoolIPv4PodCIDRList, …MaskSize, the IPv6 ones when ipv6.enabled, autoCreateCiliumPodIPPools), e.g. values.yaml",
    },
    ciliumnodes: {
      value: 'FILE',
      text: "kubectl get ciliumnodes -o yaml: the node CIDRs nodes hold (spec.ipam.podCIDRs, multi-pool's spec.ipam.pools.allocated); replaces --allocated, e.g. nodes.yaml or -",
    },
    ippools: { value: 'FILE', text: 'kubectl get ciliumpodippools -o yaml: multi-pool, each pool planned on its own, e.g. pools.yaml' },
    'azure-subnets': {
      value: 'FILE',
      text: "az network vnet subnet list -o json: every subnet's prefixes are reserved (repeatable), e.g. subnets.json",
    },
    pool: { value: 'CIDR[,CIDR…]', text: "cluster-pool's list, over the values file (default 10.0.0.0/8), e.g. 10.0.0.0/8" },
    'node-mask': {
      value: 'N',
      text: "the node CIDR mask, over the values file (default: the CiliumNodes' node CIDRs', else 24; an IPv6-only --pool: 120), e.g. 24",
    },
    'node-mask-v6': { value: 'N', text: 'the IPv6 node CIDR mask (default 120), e.g. 112' },
    reserved: { value: 'CIDR[,CIDR…]', text: "reserved CIDRs besides the subnets' (without any, every node CIDR is safe), e.g. 10.4.76.0/24" },
    allocated: { value: 'K', text: 'node CIDRs handed out so far (the next node gets index K), when no --ciliumnodes, e.g. 1000' },
    nodes: {
      value: 'N',
      text: 'the node count the proposed pool list must hold (default: the CiliumNodes given), e.g. 300',
    },
  },
  examples: [
    'ipam-shim plan --values values.yaml --ciliumnodes nodes.yaml --azure-subnets subnets.json',
    'kubectl get ciliumnodes -o yaml | ipam-shim plan --ciliumnodes - --azure-subnets subnets.json',
    'ipam-shim plan --pool 10.0.0.0/8 --node-mask 24 --reserved 10.4.76.0/24 --allocated 1000',
    'ipam-shim plan --values values.yaml --ciliumnodes nodes.yaml --reserved 10.3.0.0/24 --nodes 40',
  ],
  exitStatus:
    '0 no node CIDR collides; 1 at least one collides; 2 usage (an unreadable or malformed input file included); 3 could not run (an internal error)',
  async run(argv: string[]): Promise<CommandOutput> {
    const flags = parseFlags(argv);
    const req = await requestOf(flags).catch((e: unknown) => {
      throw e instanceof InputError || e instanceof PlanRequestError || e instanceof FitError ? new UsageError(e.message) : e;
    });
    const planned = req.pools.map((p) => ({ spec: p, plan: asUsage(() => planPool(planInputOf(p, flags, req))) }));
    const collision = planned.some((p) => p.plan.collision);
    const names = reservedNames(req.reserved);
    const nodesFrom = flags.nodes !== undefined ? '--nodes' : req.held ? 'the CiliumNodes given' : undefined;
    const inputs = {
      mode: req.mode,
      files: req.files,
      defaulted: req.defaulted,
      inferred: req.inferred,
      ...(req.held ? { nodes: req.held.nodes, pendingNodes: req.held.pending } : {}),
    };
    const data =
      req.mode === CLUSTER_POOL
        ? { ...(planToJson(planned[0]!.plan) as object), inputs }
        : { pools: planned.map((p) => ({ name: p.spec.name, source: p.spec.source, ...(planToJson(p.plan) as object) })), collision, inputs };
    const head = renderInputs(req);
    const body =
      req.mode === CLUSTER_POOL
        ? renderPlan(planned[0]!.plan, names, { target: (f) => `ipam.operator.clusterPool${f}PodCIDRList`, clusterPool: true, nodesFrom })
        : planned
            .map((p) => {
              const target = (f: string) => `CiliumPodIPPool ${shown(p.spec.name)} spec.${f.toLowerCase()}.cidrs`;
              return `pool ${shown(p.spec.name)} (${shown(p.spec.source)})\n${indent(renderPlan(p.plan, names, { target, clusterPool: false, nodesFrom }))}`;
            })
            .join('\n');
    return { data, text: head + body, exitCode: collision ? 1 : 0 };
  },
};

function parseFlags(argv: string[]): PlanSources {
  const { values } = parseArgv({
    args: argv,
    // --json is src/cli/index.ts's (it strips it); accepted here too for callers that hand it on.
    options: { ...OPTIONS, json: { type: 'boolean' } },
    allowPositionals: false,
    strict: true,
  });
  const out: PlanSources = {
    pools: splitList(values.pool),
    reserved: splitList(values.reserved),
    values: values.values ?? [],
    ciliumnodes: values.ciliumnodes ?? [],
    ippools: values.ippools ?? [],
    azureSubnets: values['azure-subnets'] ?? [],
  };
  const files = [...out.values, ...out.ciliumnodes, ...out.ippools, ...out.azureSubnets];
  if (
    !out.pools.length &&
    !out.reserved.length &&
    !files.length &&
    values['node-mask'] === undefined &&
    values['node-mask-v6'] === undefined &&
    values.allocated === undefined &&
    values.nodes === undefined
  ) {
    throw new UsageError('nothing to plan: give --values, --ippools or --pool (and what is reserved: --azure-subnets, --reserved)');
  }
  if (files.filter((f) => f === '-').length > 1) throw new UsageError('only one input can be read from stdin (-)');
  if (values.allocated !== undefined && out.ciliumnodes.length)
    throw new UsageError('--allocated and --ciliumnodes: the CiliumNodes say what is allocated; give one');
  if (out.pools.length && out.ippools.length) throw new UsageError('--pool is the cluster-pool list; --ippools plans multi-pool pools: give one');
  if (values.allocated !== undefined) out.allocated = bigFlag('--allocated', values.allocated);
  if (values.nodes !== undefined) out.nodes = bigFlag('--nodes', values.nodes);
  if (values['node-mask'] !== undefined) out.nodeMask = intFlag('--node-mask', values['node-mask']);
  if (values['node-mask-v6'] !== undefined) out.nodeMaskV6 = intFlag('--node-mask-v6', values['node-mask-v6']);
  return out;
}

function splitList(values: string[] | undefined): string[] {
  return (values ?? [])
    .flatMap((v) => v.split(','))
    .map((s) => s.trim())
    .filter(Boolean);
}

function intFlag(name: string, v: string): number {
  if (!/^\d{1,3}$/.test(v.trim())) throw new UsageError(`${name}: expected a prefix length, got "${v}"`);
  return Number(v.trim());
}

function bigFlag(name: string, v: string): bigint {
  if (!/^\d+$/.test(v.trim())) throw new UsageError(`${name}: expected a non-negative integer, got "${v}"`);
  return BigInt(v.trim());
}
