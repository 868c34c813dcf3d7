/**
 * Offline validation of deploy/kubernetes/*.yaml (must-show 1 of issue 7). `kubectl apply --dry-run=client` needs
 * an API server for discovery and the OpenAPI schema, which CI does not have; so each manifest is parsed with
 * js-yaml and checked twice:
 * 1. against the Kubernetes OpenAPI schema, through the validators that the `kubernetes-models` package generates
 *    from it (types, required fields, formats such as quantities and int-or-string; like kubectl's client-side
 *    validation it does not reject unknown fields), and
 * 2. against STRICT zod schemas of the fields we use (apps/v1 DaemonSet, core/v1 PodSpec/Container/Probe/
 *    SecurityContext/Volume, rbac/v1, core/v1 ConfigMap), which do reject an unknown or misspelt field, and a
 *    capability spelt `CAP_NET_ADMIN`, as `kubectl --validate=strict` would.
 * Then the cross-references kubectl would not check: the ConfigMap's config validates with our own schema,
 * the probes hit routes the health server serves, the ServiceAccount, ConfigMap and RBAC names match, the RBAC
 * rules cover what the Kubernetes source calls and no more, and the image tag is the package version.
 * When `kubectl` and a cluster are available, `kubectl apply --dry-run=server -f deploy/kubernetes/` is stronger.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { z } from 'zod';
import { loadAll } from 'js-yaml';
import { DaemonSet as K8sDaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import { ConfigMap as K8sConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { ServiceAccount as K8sServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { ClusterRole as K8sClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding as K8sClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { ConfigSchema } from '../config-schema/config.ts';
import { buildHealthServer, ProxyHealth } from '../agent/health.ts';
import { createProxyMetrics } from '../agent/metrics.ts';
import { FakeClock } from '../agent/testing/fake-clock.ts';

const DIR = new URL('./kubernetes/', import.meta.url);
const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

// --- strict schemas of the Kubernetes API subset the manifests use -------------------------------------------
const dns1123 = z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, 'a DNS-1123 name').max(253);
const rbacName = z.string().regex(/^[a-z0-9:.-]+$/).max(253);
const labels = z.record(z.string().regex(/^([a-z0-9.-]+\/)?[A-Za-z0-9_.-]{1,63}$/), z.string().max(63));
const meta = z.object({ name: dns1123, namespace: dns1123.optional(), labels: labels.optional(), annotations: z.record(z.string(), z.string()).optional() }).strict();
const clusterMeta = z.object({ name: rbacName, labels: labels.optional(), annotations: z.record(z.string(), z.string()).optional() }).strict();
const quantity = z.string().regex(/^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/, 'a resource quantity');
const port = z.number().int().min(1).max(65535);
const capability = z.string().regex(/^[A-Z_]+$/).refine((c) => !c.startsWith('CAP_'), 'capabilities are written without CAP_');
const probe = z.object({
  httpGet: z.object({ path: z.string().startsWith('/'), port: z.union([port, z.string()]), host: z.string().optional(), scheme: z.enum(['HTTP', 'HTTPS']).optional() }).strict(),
  initialDelaySeconds: z.number().int().min(0).optional(), periodSeconds: z.number().int().min(1).optional(),
  timeoutSeconds: z.number().int().min(1).optional(), failureThreshold: z.number().int().min(1).optional(), successThreshold: z.number().int().min(1).optional(),
}).strict();
const envVar = z.object({
  name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/),
  value: z.string().optional(),
  valueFrom: z.object({ fieldRef: z.object({ fieldPath: z.string(), apiVersion: z.string().optional() }).strict() }).strict().optional(),
}).strict();
const volumeMount = z.object({ name: dns1123, mountPath: z.string().startsWith('/'), readOnly: z.boolean().optional() }).strict();
const container = z.object({
  name: dns1123,
  image: z.string().regex(/^[a-z0-9./-]+(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?$/),
  imagePullPolicy: z.enum(['Always', 'IfNotPresent', 'Never']).optional(),
  command: z.array(z.string()).optional(), args: z.array(z.string()).optional(),
  env: z.array(envVar).optional(),
  securityContext: z.object({
    privileged: z.boolean().optional(),
    capabilities: z.object({ add: z.array(capability).optional(), drop: z.array(capability).optional() }).strict().optional(),
    readOnlyRootFilesystem: z.boolean().optional(), allowPrivilegeEscalation: z.boolean().optional(),
    runAsUser: z.number().int().optional(), runAsNonRoot: z.boolean().optional(),
  }).strict().optional(),
  ports: z.array(z.object({ name: z.string().max(15).optional(), containerPort: port, hostPort: port.optional(), protocol: z.enum(['TCP', 'UDP', 'SCTP']).optional() }).strict()).optional(),
  livenessProbe: probe.optional(), readinessProbe: probe.optional(), startupProbe: probe.optional(),
  resources: z.object({
    requests: z.object({ cpu: quantity.optional(), memory: quantity.optional() }).strict().optional(),
    limits: z.object({ cpu: quantity.optional(), memory: quantity.optional() }).strict().optional(),
  }).strict().optional(),
  volumeMounts: z.array(volumeMount).optional(),
}).strict();
const volume = z.object({
  name: dns1123,
  configMap: z.object({ name: dns1123, items: z.array(z.object({ key: z.string(), path: z.string() }).strict()).optional() }).strict().optional(),
  hostPath: z.object({ path: z.string().startsWith('/'), type: z.enum(['', 'DirectoryOrCreate', 'Directory', 'FileOrCreate', 'File', 'Socket', 'CharDevice', 'BlockDevice']).optional() }).strict().optional(),
}).strict().refine((v) => [v.configMap, v.hostPath].filter(Boolean).length === 1, 'exactly one volume source');
const toleration = z.object({
  key: z.string().optional(), operator: z.enum(['Exists', 'Equal']).optional(), value: z.string().optional(),
  effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(), tolerationSeconds: z.number().int().optional(),
}).strict();
const DaemonSet = z.object({
  apiVersion: z.literal('apps/v1'), kind: z.literal('DaemonSet'), metadata: meta,
  spec: z.object({
    selector: z.object({ matchLabels: labels }).strict(),
    updateStrategy: z.object({ type: z.enum(['RollingUpdate', 'OnDelete']), rollingUpdate: z.object({ maxUnavailable: z.union([z.number().int().min(0), z.string().regex(/^\d+%$/)]).optional(), maxSurge: z.union([z.number().int(), z.string()]).optional() }).strict().optional() }).strict().optional(),
    template: z.object({
      metadata: z.object({ labels, annotations: z.record(z.string(), z.string()).optional() }).strict(),
      spec: z.object({
        serviceAccountName: dns1123, priorityClassName: z.string().optional(), hostNetwork: z.boolean().optional(),
        dnsPolicy: z.enum(['ClusterFirst', 'ClusterFirstWithHostNet', 'Default', 'None']).optional(),
        nodeSelector: z.record(z.string(), z.string()).optional(), tolerations: z.array(toleration).optional(),
        initContainers: z.array(container).optional(), containers: z.array(container).min(1),
        volumes: z.array(volume).optional(), terminationGracePeriodSeconds: z.number().int().min(0).optional(),
      }).strict(),
    }).strict(),
  }).strict(),
}).strict();
const ServiceAccount = z.object({ apiVersion: z.literal('v1'), kind: z.literal('ServiceAccount'), metadata: meta }).strict();
const policyRule = z.object({ apiGroups: z.array(z.string()), resources: z.array(z.string()), verbs: z.array(z.enum(['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'])) }).strict();
const ClusterRole = z.object({ apiVersion: z.literal('rbac.authorization.k8s.io/v1'), kind: z.literal('ClusterRole'), metadata: clusterMeta, rules: z.array(policyRule) }).strict();
const ClusterRoleBinding = z.object({
  apiVersion: z.literal('rbac.authorization.k8s.io/v1'), kind: z.literal('ClusterRoleBinding'), metadata: clusterMeta,
  roleRef: z.object({ apiGroup: z.literal('rbac.authorization.k8s.io'), kind: z.enum(['ClusterRole', 'Role']), name: rbacName }).strict(),
  subjects: z.array(z.object({ kind: z.enum(['ServiceAccount', 'User', 'Group']), name: z.string(), namespace: dns1123.optional(), apiGroup: z.string().optional() }).strict()),
}).strict();
const ConfigMap = z.object({ apiVersion: z.literal('v1'), kind: z.literal('ConfigMap'), metadata: meta, data: z.record(z.string().regex(/^[-._a-zA-Z0-9]+$/), z.string()) }).strict();
const SCHEMAS = { DaemonSet, ServiceAccount, ClusterRole, ClusterRoleBinding, ConfigMap } as const;

type Doc = { kind: keyof typeof SCHEMAS; metadata: { name: string; namespace?: string } } & Record<string, unknown>;
function loadManifests(): Array<{ file: string; doc: Doc }> {
  const out: Array<{ file: string; doc: Doc }> = [];
  for (const file of readdirSync(DIR).filter((f) => f.endsWith('.yaml')).sort()) {
    for (const doc of loadAll(readFileSync(new URL(file, DIR), 'utf8'))) if (doc) out.push({ file, doc: doc as Doc });
  }
  return out;
}

test('every manifest parses and matches the strict schema of its kind', () => {
  const docs = loadManifests();
  assert.deepEqual(docs.map((d) => d.doc.kind).sort(), ['ClusterRole', 'ClusterRoleBinding', 'ConfigMap', 'DaemonSet', 'ServiceAccount']);
  for (const { file, doc } of docs) {
    const schema = SCHEMAS[doc.kind];
    assert.ok(schema, `${file}: unexpected kind ${doc.kind}`);
    const r = schema.safeParse(doc);
    assert.ok(r.success, `${file} ${doc.kind}/${doc.metadata?.name}: ${r.success ? '' : JSON.stringify(r.error.issues, null, 1)}`);
  }
});

/** The OpenAPI-derived validators of kubernetes-models, by kind. `validate()` throws naming the path. */
const OPENAPI: Record<string, (doc: never) => { validate(): void }> = {
  DaemonSet: (d) => new K8sDaemonSet(d), ConfigMap: (d) => new K8sConfigMap(d), ServiceAccount: (d) => new K8sServiceAccount(d),
  ClusterRole: (d) => new K8sClusterRole(d), ClusterRoleBinding: (d) => new K8sClusterRoleBinding(d),
};

test('every manifest validates against the Kubernetes OpenAPI schema (kubernetes-models)', () => {
  for (const { file, doc } of loadManifests()) {
    const make = OPENAPI[doc.kind];
    assert.ok(make, `${file}: no OpenAPI validator for ${doc.kind}`);
    assert.doesNotThrow(() => make(doc as never).validate(), `${file} ${doc.kind}/${doc.metadata.name}`);
  }
  // It can fail: a string where the API wants an integer, and a malformed quantity.
  const ds = structuredClone(loadManifests().find((d) => d.doc.kind === 'DaemonSet')!.doc) as unknown as z.infer<typeof DaemonSet>;
  (ds.spec.template.spec.containers[0].ports![0] as { containerPort: unknown }).containerPort = '10256';
  assert.throws(() => OPENAPI.DaemonSet(ds as never).validate(), /containerPort must be integer/);
  const q = structuredClone(loadManifests().find((d) => d.doc.kind === 'DaemonSet')!.doc) as unknown as z.infer<typeof DaemonSet>;
  q.spec.template.spec.containers[0].resources!.requests!.memory = '64 MB';
  assert.throws(() => OPENAPI.DaemonSet(q as never).validate(), /memory must match format "quantity"/);
});

test('the schemas reject what kubectl would (a misspelt field, CAP_ prefixes, a bad quantity)', () => {
  const ds = loadManifests().find((d) => d.doc.kind === 'DaemonSet')!.doc as z.infer<typeof DaemonSet>;
  const clone = () => structuredClone(ds);
  const typo = clone() as unknown as { spec: { template: { spec: Record<string, unknown> } } };
  typo.spec.template.spec.hostNetWork = true;
  assert.equal(DaemonSet.safeParse(typo).success, false);
  const cap = clone();
  cap.spec.template.spec.containers[0].securityContext!.capabilities!.add = ['CAP_NET_ADMIN'];
  assert.equal(DaemonSet.safeParse(cap).success, false);
  const q = clone();
  q.spec.template.spec.containers[0].resources!.requests!.memory = '64 MB';
  assert.equal(DaemonSet.safeParse(q).success, false);
});

test('the DaemonSet is wired as issue 7 asks: hostNetwork, critical, NET_ADMIN, init-only, NODE_NAME, probes, tolerations', async () => {
  const docs = loadManifests();
  const ds = DaemonSet.parse(docs.find((d) => d.doc.kind === 'DaemonSet')!.doc);
  const cm = ConfigMap.parse(docs.find((d) => d.doc.kind === 'ConfigMap')!.doc);
  const sa = ServiceAccount.parse(docs.find((d) => d.doc.kind === 'ServiceAccount')!.doc);
  const pod = ds.spec.template.spec;
  assert.equal(pod.hostNetwork, true);
  assert.equal(pod.priorityClassName, 'system-node-critical');
  assert.deepEqual(pod.tolerations, [{ operator: 'Exists' }]);
  assert.equal(pod.serviceAccountName, sa.metadata.name);
  assert.equal(sa.metadata.namespace, ds.metadata.namespace);
  assert.deepEqual(ds.spec.selector.matchLabels, ds.spec.template.metadata.labels);

  const [init] = pod.initContainers!;
  assert.deepEqual(init.command?.slice(0, 3), ['nftproxy', 'run', '--init-only']);
  assert.equal(init.securityContext?.privileged, true, 'only the init container is privileged');
  const [main] = pod.containers;
  assert.equal(main.securityContext?.privileged, undefined);
  assert.deepEqual(main.securityContext?.capabilities, { add: ['NET_ADMIN', 'SYS_RESOURCE'], drop: ['ALL'] });
  assert.deepEqual(main.command, ['nftproxy', 'run', '--config', '/etc/nftproxy/config.json', '--hostname-override', '$(NODE_NAME)']);
  for (const c of [init, main]) {
    assert.deepEqual(c.env?.find((e) => e.name === 'NODE_NAME')?.valueFrom, { fieldRef: { fieldPath: 'spec.nodeName' } }, c.name);
    assert.equal(c.image, `ghcr.io/nftproxy/nftproxy:${VERSION}`, 'the image tag is the package version');
    assert.ok(c.volumeMounts?.some((m) => m.mountPath === '/etc/nftproxy' && m.readOnly), c.name);
  }
  assert.ok(main.volumeMounts?.some((m) => m.mountPath === '/lib/modules' && m.readOnly));
  assert.equal(pod.volumes?.find((v) => v.name === 'config')?.configMap?.name, cm.metadata.name);

  // The ConfigMap's config validates with our schema, uses the API source, and serves health where the probes go.
  const cfg = ConfigSchema.parse(JSON.parse(cm.data['config.json']));
  assert.equal(cfg.source.type, 'kubernetes');
  assert.equal(cfg.healthzBindAddress, '0.0.0.0:10256');
  assert.deepEqual([main.livenessProbe?.httpGet, main.readinessProbe?.httpGet], [{ path: '/livez', port: 10256 }, { path: '/healthz', port: 10256 }]);
  const app = buildHealthServer(new ProxyHealth(new FakeClock(), 60_000), createProxyMetrics());
  for (const path of ['/livez', '/healthz']) {
    const res = await app.inject({ method: 'GET', url: path });
    assert.notEqual(res.statusCode, 404, `${path} is served by the health server`);
  }
  await app.close();
});

test('RBAC is least privilege: list+watch of services, endpointslices and nodes; create+patch of events; bound to the ServiceAccount', () => {
  const docs = loadManifests();
  const role = ClusterRole.parse(docs.find((d) => d.doc.kind === 'ClusterRole')!.doc);
  const binding = ClusterRoleBinding.parse(docs.find((d) => d.doc.kind === 'ClusterRoleBinding')!.doc);
  const sa = ServiceAccount.parse(docs.find((d) => d.doc.kind === 'ServiceAccount')!.doc);
  const grants = new Set(role.rules.flatMap((r) => r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${g || 'core'}/${res}:${v}`)))));
  assert.deepEqual([...grants].sort(), [
    'core/events:create', 'core/events:patch', 'core/nodes:list', 'core/nodes:watch', 'core/services:list', 'core/services:watch',
    'discovery.k8s.io/endpointslices:list', 'discovery.k8s.io/endpointslices:watch', 'events.k8s.io/events:create', 'events.k8s.io/events:patch',
  ]);
  assert.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role.metadata.name });
  assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: sa.metadata.namespace }]);
});
