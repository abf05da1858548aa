// infra/k8s against the schemas of one pinned Kubernetes version, with an established offline
// validator (kubernetes-validate from PyPI, which bundles the schemas; .ci/run installs it into
// test/infra/.venv). Strict mode: unknown fields are errors too. A broken fixture proves it fails.
// The NATS ConfigMap is also checked against the repo: its auth.conf is infra/nats/auth.conf, and
// its nats.conf passes `nats-server -t` (the local 2.9.10). The images the manifests name are the
// tags docker/Dockerfile's targets are built as; the HPAs scale on metrics the adapter rules publish;
// the alert rules parse and use only metrics Cohort exports, and the SLO's error codes are exactly the
// registry's 5xx codes. Not checked (no cluster, no Prometheus here): that the PromQL evaluates, that
// the adapter serves the metrics, scheduling, the PersistentVolume behind the claim.
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { ERROR_CODES } from '@cohort/protocol'

/** The Kubernetes version the manifests are written for. */
const KUBERNETES_VERSION = '1.33.0'
const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const K8S_DIR = join(ROOT, 'infra/k8s')
const VENV = join(ROOT, 'test/infra/.venv/bin')
const VALIDATE = join(VENV, 'kubernetes-validate')
const BROKEN = join(ROOT, 'test/infra/fixtures/broken-deployment.yaml')
const tmp = mkdtempSync(join(tmpdir(), 'cohort-k8s-'))

afterAll(() => rmSync(tmp, { recursive: true, force: true }))

function run(cmd: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: { ...process.env, ...env }, timeout: 50_000 }, (e, stdout, stderr) => {
      const code = e ? (typeof e.code === 'number' ? e.code : 1) : 0
      resolve({ code, out: `${stdout}${stderr}` })
    })
  })
}

function validate(files: string[]) {
  if (!existsSync(VALIDATE)) {
    throw new Error(`${VALIDATE} is missing: python3 -m venv test/infra/.venv && test/infra/.venv/bin/pip install kubernetes-validate==1.37.0 (.ci/run does this)`)
  }
  return run(VALIDATE, ['--kubernetes-version', KUBERNETES_VERSION, '--strict', ...files])
}

const manifests = readdirSync(K8S_DIR)
  .filter((f) => f.endsWith('.yaml'))
  .map((f) => join(K8S_DIR, f))

/** The `data` of the ConfigMap named `name` in a manifest file (parsed by the venv's PyYAML). */
async function configMapData(file: string, name: string): Promise<Record<string, string>> {
  const py = `import json,sys,yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d.get("kind") == "ConfigMap" and d["metadata"]["name"] == sys.argv[2]:
        print(json.dumps(d["data"]))`
  const r = await run(join(VENV, 'python'), ['-c', py, file, name])
  expect(r.code, r.out).toBe(0)
  return JSON.parse(r.out) as Record<string, string>
}

describe(`Kubernetes manifests (infra/k8s) against Kubernetes ${KUBERNETES_VERSION}`, () => {
  it('has the manifests it documents', () => {
    const names = manifests.map((f) => f.slice(K8S_DIR.length + 1)).sort()
    expect(names).toEqual([
      'gateway.yaml',
      'namespace.yaml',
      'nats-users-secret.yaml',
      'nats.yaml',
      'prometheus-adapter-rules.yaml',
      'prometheus-rules.yaml',
      'worker-cpu.yaml',
      'worker.yaml',
    ])
  })

  it('validates every resource of every manifest (strict schemas)', async () => {
    const r = await validate(manifests)
    expect(r.code, r.out).toBe(0)
    expect(r.out).not.toMatch(/ERROR|WARN/)
    const kinds = [...r.out.matchAll(/passed for resource (\S+) against version/g)].map((m) => m[1])
    expect(kinds.sort()).toEqual(
      [
        'configmap/cohort-prometheus-adapter',
        'configmap/cohort-prometheus-rules',
        'configmap/nats-config',
        'deployment/cohort-gateway',
        'deployment/cohort-worker',
        'deployment/cohort-worker-cpu',
        'horizontalpodautoscaler/cohort-gateway',
        'horizontalpodautoscaler/cohort-worker',
        'horizontalpodautoscaler/cohort-worker-cpu',
        'namespace/cohort',
        'persistentvolumeclaim/cohort-models',
        'poddisruptionbudget/cohort-gateway',
        'poddisruptionbudget/cohort-worker',
        'poddisruptionbudget/cohort-worker-cpu',
        'poddisruptionbudget/nats',
        'secret/cohort-nats-users',
        'service/cohort-gateway',
        'service/nats',
        'service/nats-client',
        'statefulset/nats',
      ].sort(),
    )
  })

  it('rejects a broken manifest', async () => {
    const r = await validate([BROKEN])
    expect(r.code).not.toBe(0)
    expect(r.out).toMatch(/ERROR .*broken-deployment\.yaml did not validate/)
    // And an unknown field alone (strict mode), in a copy of a real manifest.
    const typo = join(tmp, 'typo.yaml')
    writeFileSync(typo, readFileSync(join(K8S_DIR, 'worker.yaml'), 'utf8').replace('terminationGracePeriodSeconds:', 'terminationGracePeriodSecond:'))
    const t = await validate([typo])
    expect(t.code).not.toBe(0)
    expect(t.out).toMatch(/terminationGracePeriodSecond/)
  })

  it('runs NATS with the repo auth.conf and a config nats-server accepts', async () => {
    const data = await configMapData(join(K8S_DIR, 'nats.yaml'), 'nats-config')
    expect(data['auth.conf'], 'infra/k8s/nats.yaml lags infra/nats/auth.conf: run infra/scripts/k8s-sync-auth.sh').toBe(readFileSync(join(ROOT, 'infra/nats/auth.conf'), 'utf8'))
    writeFileSync(join(tmp, 'nats.conf'), data['nats.conf'] ?? '')
    writeFileSync(join(tmp, 'auth.conf'), data['auth.conf'] ?? '')
    const r = await run('nats-server', ['-c', join(tmp, 'nats.conf'), '-t'], {
      POD_NAME: 'nats-0',
      COHORT_NATS_GATEWAY_PASS: 'a',
      COHORT_NATS_WORKER_PASS: 'b',
      COHORT_NATS_ADMIN_PASS: 'c',
    })
    expect(r.code, r.out).toBe(0)
    expect(r.out).toMatch(/valid/)
  })

  it('gives workers a GPU, probes, and a drain budget', () => {
    const worker = readFileSync(join(K8S_DIR, 'worker.yaml'), 'utf8')
    expect(worker).toMatch(/nvidia\.com\/gpu: 1/)
    expect(worker).toMatch(/readinessProbe:\s+#[^\n]*\n\s+httpGet: \{ path: \/v2\/health\/ready/)
    expect(worker).toMatch(/terminationGracePeriodSeconds: \d+/)
    const gateway = readFileSync(join(K8S_DIR, 'gateway.yaml'), 'utf8')
    expect(gateway).toMatch(/name: cohort_gateway_requests_per_second/)
    expect(gateway).toMatch(/--drain-ms=5000/)
  })

  it('names the images docker/Dockerfile builds, one per role, and the install variable the README documents', () => {
    const dockerfile = readFileSync(join(ROOT, 'docker/Dockerfile'), 'utf8')
    const built = new Map([...dockerfile.matchAll(/--target (\S+) +-t (\S+) \./g)].map((m) => [m[2]!, m[1]!]))
    const targets = new Set([...dockerfile.matchAll(/^FROM \S+ AS (\S+)$/gm)].map((m) => m[1]!))
    for (const t of built.values()) {
      expect(targets.has(t), t).toBe(true)
    }
    const images = new Map<string, string>()
    for (const f of ['gateway.yaml', 'worker.yaml', 'worker-cpu.yaml']) {
      for (const m of readFileSync(join(K8S_DIR, f), 'utf8').matchAll(/^\s+image: (\S+)$/gm)) {
        images.set(f, m[1]!)
      }
    }
    expect(Object.fromEntries([...images].map(([f, i]) => [f, built.get(i)]))).toEqual({ 'gateway.yaml': 'gateway', 'worker.yaml': 'worker-cuda', 'worker-cpu.yaml': 'worker-cpu' })
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
    const variable = /(ONNXRUNTIME_NODE_INSTALL=cuda12)/.exec(readFileSync(join(K8S_DIR, 'worker.yaml'), 'utf8'))
    expect(variable).not.toBeNull()
    expect(readme).toContain(variable![1])
  })

  it('scales workers on the queue-wait metric the adapter publishes, with a PDB and a repository volume', async () => {
    const adapter = await configMapData(join(K8S_DIR, 'prometheus-adapter-rules.yaml'), 'cohort-prometheus-adapter')
    const published = [...(adapter['config.yaml'] ?? '').matchAll(/as: "(\w+)"/g)].map((m) => m[1])
    for (const f of ['worker.yaml', 'worker-cpu.yaml']) {
      const w = readFileSync(join(K8S_DIR, f), 'utf8')
      const metric = /type: Pods\s+pods:\s+metric:\s+name: (\w+)/.exec(w)?.[1]
      expect(metric, f).toBe('cohort_worker_queue_wait_seconds')
      expect(published).toContain(metric)
      expect(w, f).toMatch(/kind: PodDisruptionBudget/)
      expect(w, f).toMatch(/mountPath: \/models, readOnly: true/)
      expect(w, f).toMatch(/claimName: cohort-models/)
    }
    expect(published).toContain(/name: (cohort_gateway_requests_per_second)/.exec(readFileSync(join(K8S_DIR, 'gateway.yaml'), 'utf8'))?.[1])
  })

  it("alerts on queue wait, refusals, worker loss and SLO burn, with metrics Cohort exports and the registry's 5xx codes", async () => {
    const data = await configMapData(join(K8S_DIR, 'prometheus-rules.yaml'), 'cohort-prometheus-rules')
    const file = join(tmp, 'rules.yaml')
    writeFileSync(file, data['cohort.rules.yaml'] ?? '')
    const r = await run(join(VENV, 'python'), ['-c', `import json,sys,yaml\nprint(json.dumps(yaml.safe_load(open(sys.argv[1]))))`, file])
    expect(r.code, r.out).toBe(0)
    const groups = (JSON.parse(r.out) as { groups: { rules: { alert?: string; record?: string; expr: string }[] }[] }).groups
    const rules = groups.flatMap((g) => g.rules)
    const alerts = rules.filter((x) => x.alert).map((x) => x.alert)
    expect(alerts).toEqual(expect.arrayContaining(['CohortQueueWaitHigh', 'CohortRefusals', 'CohortWorkerLost', 'CohortErrorBudgetBurnFast', 'CohortErrorBudgetBurnSlow']))
    // Every cohort_* series an expression reads is one Cohort exports (histograms by their _bucket/_sum/_count).
    const exported = new Set([...readFileSync(join(ROOT, 'libs/metrics/src/cohort-metrics.ts'), 'utf8').matchAll(/'(cohort_[a-z_]+)'/g)].map((m) => m[1]))
    const records = new Set(rules.filter((x) => x.record).map((x) => x.record))
    const used = rules.flatMap((x) => [...x.expr.matchAll(/\b(cohort[:_][a-z0-9_:]+)/g)].map((m) => m[1]!))
    expect(used.length).toBeGreaterThan(10)
    for (const m of used) {
      expect(records.has(m) || exported.has(m.replace(/_(bucket|sum|count)$/, '')), m).toBe(true)
    }
    const fiveXx = Object.entries(ERROR_CODES)
      .filter(([, e]) => (e as { status: number }).status >= 500)
      .map(([c]) => c)
      .sort()
    for (const x of rules.filter((y) => y.record?.startsWith('cohort:request_errors'))) {
      expect(/code=~"([A-Z_|]+)"/.exec(x.expr)?.[1]?.split('|').sort(), x.record).toEqual(fiveXx)
    }
  })
})
