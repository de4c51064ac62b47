// Kubernetes' own schema of its built-in API types, offline: the structured-merge-diff schema generated from the
// API's OpenAPI document into client-go's applyconfigurations (what client-go and kubectl use for server-side apply),
// from Debian's golang-k8s-client-go-dev 0.36.4 (Kubernetes 1.36), unpacked by scripts/install-deps.sh at
// .deps/k8s-client-go. Every field of an object must be one its type declares (a misspelt field is an error, as
// the API server's strict field validation makes it), every scalar of the declared kind (string, number, boolean;
// IntOrString and Quantity take either). Kinds the schema does not hold (CRDs: the Prometheus operator's
// PodMonitor, PrometheusRule) are reported as skipped, never as valid.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ROOT } from '../../../scripts/image/build-image.js';

type Obj = Record<string, any>;
interface TypeRef {
  namedType?: string;
  scalar?: 'string' | 'numeric' | 'boolean' | 'untyped';
  list?: { elementType: TypeRef };
  map?: { fields?: Array<{ name: string; type: TypeRef }>; elementType?: TypeRef };
}

const SCHEMA_FILE = 'applyconfigurations/internal/internal.go';

/** client-go's source dir (K8S_CLIENT_GO overrides .deps/k8s-client-go), or undefined when absent. */
export function clientGoDir(): string | undefined {
  return [process.env.K8S_CLIENT_GO, join(ROOT, '.deps/k8s-client-go')].find((d): d is string => Boolean(d) && existsSync(join(d!, SCHEMA_FILE)));
}

export interface SchemaReport {
  /** "kind name: path: problem" per problem found. */
  errors: string[];
  /** Objects whose kind the schema does not hold. */
  skipped: string[];
  validated: string[];
}

export class K8sSchema {
  private constructor(private readonly types: Map<string, TypeRef>) {}

  static async load(dir = clientGoDir()): Promise<K8sSchema> {
    if (!dir) throw new Error('no client-go schema: run scripts/install-deps.sh (or set K8S_CLIENT_GO)');
    const go = await readFile(join(dir, SCHEMA_FILE), 'utf8');
    const m = /typed\.YAMLObject\(`([\s\S]*?)`\)/.exec(go);
    if (!m) throw new Error(`${SCHEMA_FILE}: no schema YAML`);
    const doc = parse(m[1]!) as { types: Array<TypeRef & { name: string }> };
    return new K8sSchema(new Map(doc.types.map((t) => [t.name, t])));
  }

  /** The schema's type for an apiVersion and kind (io.k8s.api.<group|core>.<version>.<Kind>). */
  typeOf(apiVersion: string, kind: string): string | undefined {
    const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['core', apiVersion];
    const name = `io.k8s.api.${group!.replace(/\.k8s\.io$/, '')}.${version}.${kind}`;
    return this.types.has(name) ? name : undefined;
  }

  validate(objects: Obj[]): SchemaReport {
    const report: SchemaReport = { errors: [], skipped: [], validated: [] };
    for (const o of objects) {
      const id = `${o.kind} ${o.metadata?.name ?? '?'}`;
      const type = typeof o.apiVersion === 'string' && typeof o.kind === 'string' ? this.typeOf(o.apiVersion, o.kind) : undefined;
      if (!type) {
        report.skipped.push(`${id} (${o.apiVersion}: not a built-in kind)`);
        continue;
      }
      report.validated.push(id);
      for (const e of this.check(o, { namedType: type }, '')) report.errors.push(`${id}: ${e}`);
    }
    return report;
  }

  private resolve(t: TypeRef): TypeRef {
    if (!t.namedType) return t;
    const named = this.types.get(t.namedType);
    if (!named) throw new Error(`schema: no type ${t.namedType}`);
    return named;
  }

  private check(value: unknown, ref: TypeRef, path: string): string[] {
    if (value === null || value === undefined) return [];
    const t = this.resolve(ref);
    const at = path || '.';
    if (Array.isArray(value)) {
      if (!t.list) return [`${at}: a list where the schema has ${describe(t)}`];
      return value.flatMap((v, i) => this.check(v, t.list!.elementType, `${path}[${i}]`));
    }
    if (typeof value === 'object') {
      if (!t.map) return [`${at}: an object where the schema has ${describe(t)}`];
      const fields = new Map((t.map.fields ?? []).map((f) => [f.name, f.type]));
      return Object.entries(value as Obj).flatMap(([k, v]) => {
        const ft = fields.get(k) ?? t.map!.elementType;
        if (!ft) return [`${path}.${k}: unknown field (the type has ${[...fields.keys()].join(', ')})`];
        return this.check(v, ft, `${path}.${k}`);
      });
    }
    if (!t.scalar) return [`${at}: ${JSON.stringify(value)} where the schema has ${describe(t)}`];
    const kind = typeof value === 'string' ? 'string' : typeof value === 'number' ? 'numeric' : typeof value === 'boolean' ? 'boolean' : 'other';
    if (t.scalar !== 'untyped' && t.scalar !== kind) return [`${at}: ${JSON.stringify(value)} is not a ${t.scalar}`];
    return [];
  }
}

function describe(t: TypeRef): string {
  return t.map ? 'an object' : t.list ? 'a list' : t.scalar ? `a ${t.scalar} scalar` : 'nothing';
}
