// The production install the container images perform (docker/Dockerfile runs
// scripts/prod-install.sh ROLE), run here on copies of this checkout (the files git tracks or would
// add, without test/ but test/support: the build context .dockerignore leaves), in the layout of
// the images: the app at ROOT/app-*, the model repository volume at ROOT/models beside it, and
// ROOT/node_modules linked to the worker app's (the images' /node_modules link). Then the images'
// entrypoints and environment: `cohort serve`, and the gateway (its install without onnxruntime-node)
// with a CPU worker over a real nats-server, serving the demo, an ONNX model and a TypeScript
// predictor from the repository; the HEALTHCHECK command (docker/healthcheck.mjs) against both.
// Not run here (no container runtime): the image build itself, the base images, the CUDA install
// (needs api.nuget.org) and `npm audit` (this machine's registry answers its endpoint 405).
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildDemoMlp } from '@cohort/onnx-builder'
import { cohortArgs, spawnProcess, startNatsServer, type CliProcess, type NatsServerHandle } from '@cohort/test-support'

const REPO = resolve(import.meta.dirname, '../..')
const root = mkdtempSync(join(tmpdir(), 'cohort-prod-'))
const apps = { cpu: join(root, 'app-cpu'), gateway: join(root, 'app-gateway') }
const models = join(root, 'models')

/** A user's shell: no npm_* variables of the npm run that started vitest; what the Dockerfile's ENV sets. */
const baseEnv = {
  ...(Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k))) as Record<string, string>),
  ONNXRUNTIME_NODE_INSTALL: 'skip',
  COHORT_CACHE_DIR: join(root, 'cache'),
}

/** The files of the build context: what git tracks or would add, less what .dockerignore leaves out of test/. */
function copyContext(to: string): void {
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: REPO, encoding: 'utf8' })
    .split('\0')
    .filter((f) => f && (!f.startsWith('test/') || f.startsWith('test/support/')) && existsSync(join(REPO, f)))
  for (const f of files) {
    mkdirSync(dirname(join(to, f)), { recursive: true })
    copyFileSync(join(REPO, f), join(to, f))
  }
}

function prodInstall(role: 'cpu' | 'gateway'): string {
  copyContext(apps[role])
  const r = spawnSync('bash', ['scripts/prod-install.sh', role, join(root, `sbom-${role}.cdx.json`)], {
    cwd: apps[role],
    // The audit endpoint is not reachable here (405): skipped, as the Dockerfile's COHORT_AUDIT=skip does.
    env: { ...baseEnv, COHORT_AUDIT: 'skip', npm_config_prefer_offline: 'true' },
    encoding: 'utf8',
  })
  expect(r.status, `${r.stdout}${r.stderr}`).toBe(0)
  return r.stdout
}

/** The README's `my-predictor.ts` (the `shout` predictor). */
function readmePredictor(): string {
  const m = /## Batch predictors in TypeScript\s+```ts\n([\s\S]*?)```/.exec(readFileSync(join(REPO, 'README.md'), 'utf8'))
  expect(m).not.toBeNull()
  return m![1]!
}

const procs: CliProcess[] = []
let nats: NatsServerHandle | undefined

function cohort(role: 'cpu' | 'gateway', args: string[], env: Record<string, string>): CliProcess {
  // The images' ENTRYPOINT: apps/cli/bin/cohort.js, in /app (node with its shebang's flags).
  const p = spawnProcess(process.execPath, [...cohortArgs(join(apps[role], 'apps/cli/bin/cohort.js')), ...args], {
    cwd: apps[role],
    env: { ...baseEnv, ...env },
    label: `${role} ${args[0]}`,
    waitTimeoutMs: 120_000,
  })
  procs.push(p)
  return p
}

/** docker/healthcheck.mjs as the HEALTHCHECK runs it: its exit code. */
function healthcheck(port: number): number | null {
  return spawnSync(process.execPath, ['docker/healthcheck.mjs'], { cwd: apps.cpu, env: { ...baseEnv, COHORT_HEALTH_PORT: String(port) }, encoding: 'utf8' }).status
}

async function infer(url: string, model: string): Promise<Response> {
  return fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ inputs: [{ name: 'input', shape: [1, 256], datatype: 'FP32', data: Array.from({ length: 256 }, (_, i) => i / 256) }] }),
  })
}

async function checkModels(url: string): Promise<void> {
  for (const m of ['demo', 'tiny']) {
    const r = await infer(url, m)
    expect(r.status, m).toBe(200)
    expect((await r.json()).outputs[0]).toMatchObject({ name: 'logits', shape: [1, 10] })
  }
  const s = await fetch(`${url}/models/shout/predictions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input: { text: 'hi', times: 2 } }),
  })
  expect(s.status).toBe(200)
  expect((await s.json()).output).toEqual({ text: 'HIHI' })
}

beforeAll(() => {
  prodInstall('cpu')
  prodInstall('gateway')
  mkdirSync(join(models, 'shout/1'), { recursive: true })
  writeFileSync(join(models, 'shout/1/model.ts'), readmePredictor())
  mkdirSync(join(models, 'tiny/1'), { recursive: true })
  writeFileSync(join(models, 'tiny/1/model.onnx'), buildDemoMlp(7))
  symlinkSync(join(apps.cpu, 'node_modules'), join(root, 'node_modules'))
}, 600_000)

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')))
  await nats?.stop()
  rmSync(root, { recursive: true, force: true })
})

describe('the production install of the images (scripts/prod-install.sh)', () => {
  it('installs no dev dependency: nothing package-lock.json marks dev is on disk; tsx and its esbuild are', () => {
    const lock = JSON.parse(readFileSync(join(REPO, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> }
    const dev = Object.entries(lock.packages).filter(([k, p]) => p.dev && k.startsWith('node_modules/'))
    expect(dev.length).toBeGreaterThan(50)
    for (const app of Object.values(apps)) {
      expect(dev.filter(([k]) => existsSync(join(app, k))).map(([k]) => k)).toEqual([])
      for (const d of ['vitest', 'typescript', 'eslint', 'bun', 'workerd', 'playwright-core']) {
        expect(existsSync(join(app, 'node_modules', d)), d).toBe(false)
      }
      // Runtime, not dev: the cohort command runs TypeScript through tsx, which needs esbuild.
      expect(existsSync(join(app, 'node_modules/tsx/package.json'))).toBe(true)
      expect(existsSync(join(app, `node_modules/@esbuild/${process.platform}-${process.arch}`))).toBe(true)
    }
  })

  it('keeps only this platform of onnxruntime-node for workers, and none of it for the gateway', () => {
    const bin = join(apps.cpu, 'node_modules/onnxruntime-node/bin/napi-v6')
    expect(readdirSync(bin)).toEqual([process.platform])
    expect(readdirSync(join(bin, process.platform))).toEqual([process.arch])
    expect(readdirSync(join(bin, process.platform, process.arch))).toContain('libonnxruntime.so.1')
    expect(existsSync(join(apps.gateway, 'node_modules/onnxruntime-node'))).toBe(false)
  })

  it('writes a CycloneDX SBOM of the runtime dependencies', () => {
    const sbom = JSON.parse(readFileSync(join(root, 'sbom-cpu.cdx.json'), 'utf8')) as { bomFormat: string; components: { name: string; version: string }[] }
    expect(sbom.bomFormat).toBe('CycloneDX')
    const names = new Set(sbom.components.map((c) => c.name))
    for (const n of ['onnxruntime-node', 'hono', 'tsx', '@nats-io/nats-core']) {
      expect(names.has(n), n).toBe(true)
    }
    expect(names.has('vitest')).toBe(false)
    expect(names.has('typescript')).toBe(false)
    // The gateway's SBOM is of its own pruned install: no onnxruntime-node.
    const gw = JSON.parse(readFileSync(join(root, 'sbom-gateway.cdx.json'), 'utf8')) as { components: { name: string }[] }
    expect(gw.components.some((c) => c.name === 'hono')).toBe(true)
    expect(gw.components.some((c) => c.name === 'onnxruntime-node')).toBe(false)
  })

  it('refuses an unknown role', () => {
    const r = spawnSync('bash', ['scripts/prod-install.sh', 'gpu'], { cwd: apps.cpu, encoding: 'utf8' })
    expect(r.status).toBe(2)
    expect(r.stderr).toMatch(/unknown role "gpu"/)
  })
})

describe("the images' entrypoints on the production install", () => {
  it('cohort serve: COHORT_HOST, PORT, COHORT_MODELS and COHORT_MODEL_REPOSITORY; the health check follows readiness and the drain', async () => {
    const s = cohort('cpu', ['serve', '--drain-ms=3000'], { COHORT_HOST: '127.0.0.1', PORT: '0', COHORT_MODELS: 'demo', COHORT_MODEL_REPOSITORY: models })
    const [, url, port] = await s.waitFor(/serving .* on (http:\/\/127\.0\.0\.1:(\d+))/)
    await checkModels(url!)
    expect(healthcheck(Number(port))).toBe(0)
    s.proc.kill('SIGTERM')
    await s.waitFor(/draining/)
    // Readiness answers 503 for --drain-ms: the health check fails at once.
    expect(healthcheck(Number(port))).toBe(1)
    expect(await s.exited).toBe(0)
    expect(healthcheck(Number(port))).toBe(1)
  }, 180_000)

  it('gateway (no onnxruntime-node) and CPU worker over NATS, as the images run them', async () => {
    nats = await startNatsServer()
    const worker = cohort('cpu', ['worker', '--metrics-port=0', '--metrics-host=127.0.0.1'], { NATS_URL: nats.url, COHORT_MODELS: 'demo', COHORT_MODEL_REPOSITORY: models })
    const metricsPort = Number((await worker.waitFor(/worker metrics on http:\/\/127\.0\.0\.1:(\d+)/))[1])
    const gateway = cohort('gateway', ['gateway'], { NATS_URL: nats.url, COHORT_HOST: '127.0.0.1', PORT: '0' })
    const [, url, port] = await gateway.waitFor(/gateway on (http:\/\/127\.0\.0\.1:(\d+))/)
    for (let i = 0; i < 240 && (await fetch(`${url}/v2/health/ready`)).status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 250))
    }
    await checkModels(url!)
    expect(healthcheck(Number(port))).toBe(0)
    expect(healthcheck(metricsPort)).toBe(0)
    expect(await gateway.stop('SIGTERM', 60_000)).toBe(0)
    expect(await worker.stop('SIGTERM', 60_000)).toBe(0)
    expect(worker.output()).toMatch(/worker drained/)
  }, 240_000)
})
