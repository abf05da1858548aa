// infra/k8s against the schemas of one pinned Kubernetes version, with an established offline
// validator (kubernetes-validate from PyPI, which bundles the schemas; .ci/run installs it into
// test/infra/.venv). Strict mode: unknown fields are errors too. A broken fixture proves it fails.
// The NATS ConfigMap is also checked against the repo: its auth.conf is infra/nats/auth.conf, and
// its nats.conf passes `nats-server -t` (the local 2.9.10).
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

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
    throw new Error(
      `${VALIDATE} is missing: python3 -m venv test/infra/.venv && test/infra/.venv/bin/pip install kubernetes-validate==1.37.0 (.ci/run does this)`,
    )
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
    expect(names).toEqual(['gateway.yaml', 'namespace.yaml', 'nats-users-secret.yaml', 'nats.yaml', 'prometheus-adapter-rules.yaml', 'worker.yaml'])
  })

  it('validates every resource of every manifest (strict schemas)', async () => {
    const r = await validate(manifests)
    expect(r.code, r.out).toBe(0)
    expect(r.out).not.toMatch(/ERROR|WARN/)
    const kinds = [...r.out.matchAll(/passed for resource (\S+) against version/g)].map((m) => m[1])
    expect(kinds.sort()).toEqual(
      [
        'configmap/cohort-prometheus-adapter',
        'configmap/nats-config',
        'deployment/cohort-gateway',
        'deployment/cohort-worker',
        'horizontalpodautoscaler/cohort-gateway',
        'namespace/cohort',
        'poddisruptionbudget/cohort-gateway',
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
})
