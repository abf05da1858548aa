import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { demoMlpReference } from '@cohort/onnx-builder'
import { spawnCohort, startNatsServer, writeModelFixtures, type CliProcess, type NatsServerHandle } from '@cohort/test-support'

const run = promisify(execFile)

/** This folder (test/python). */
export const PY_DIR = fileURLToPath(new URL('.', import.meta.url))
export const VENV_BIN = join(PY_DIR, '.venv', 'bin')

/** Environment for perf_analyzer: it links libcudart.so.12, shipped by nvidia-cuda-runtime-cu12. */
export function toolEnv(): NodeJS.ProcessEnv {
  const libRoot = join(PY_DIR, '.venv', 'lib')
  const py = readdirSync(libRoot).find((d) => d.startsWith('python3')) ?? 'python3'
  const lib = join(libRoot, py, 'site-packages', 'nvidia', 'cuda_runtime', 'lib')
  return { ...process.env, LD_LIBRARY_PATH: [lib, process.env['LD_LIBRARY_PATH']].filter(Boolean).join(':') }
}

/** Create or check test/python/.venv (idempotent; .ci/run has already done it in CI). */
export async function ensureVenv(): Promise<void> {
  await run('bash', [join(PY_DIR, 'setup.sh')], { timeout: 600_000 })
}

/** nats-server + one worker (demo and identity models) + a gateway with HTTP and gRPC ports. */
export interface Stack {
  nats: NatsServerHandle
  worker: CliProcess
  gateway: CliProcess
  http: string
  grpc: string
  dir: string
  close(): Promise<void>
}

export async function startStack(): Promise<Stack> {
  const nats = await startNatsServer()
  const fx = writeModelFixtures()
  const worker = spawnCohort(['worker', '--nats', nats.url, '--model', 'demo', '--model', `identity=${fx.identity}`])
  const gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--grpc-port', '0'])
  const stop = async () => {
    await Promise.all([worker.stop('SIGKILL'), gateway.stop('SIGKILL')])
    await nats.stop()
  }
  try {
    await worker.waitFor(/serving/, 90_000)
    const [, grpcPort] = await gateway.waitFor(/grpc on 127\.0\.0\.1:(\d+)/, 60_000)
    const [, httpPort] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 60_000)
    return { nats, worker, gateway, http: `127.0.0.1:${httpPort}`, grpc: `127.0.0.1:${grpcPort}`, dir: fx.dir, close: stop }
  } catch (e) {
    await stop()
    throw e
  }
}

/** Input rows for the demo MLP and its reference logits (TypeScript forward pass), as a JSON file. */
export function writeDemoExpectations(): string {
  const rows = 3
  const x = new Float32Array(rows * 256).map((_, i) => Math.sin(i * 0.37))
  const y = demoMlpReference(x, rows)
  const chunk = (a: Float32Array, n: number) => Array.from({ length: a.length / n }, (_, r) => Array.from(a.subarray(r * n, r * n + n)))
  const file = join(mkdtempSync(join(tmpdir(), 'cohort-py-')), 'demo.json')
  writeFileSync(file, JSON.stringify({ input: chunk(x, 256), logits: chunk(y, 10) }))
  return file
}

/** One perf_analyzer row of its CSV (`-f`): concurrency and throughput, plus every column by name. */
export interface PerfRow {
  concurrency: number
  throughput: number
  columns: Record<string, string>
}

/** Run perf_analyzer and parse its CSV; rejects (with its output) when it exits non-zero. */
export async function perfAnalyzer(args: string[]): Promise<{ rows: PerfRow[]; stdout: string }> {
  const csv = join(mkdtempSync(join(tmpdir(), 'cohort-pa-')), 'out.csv')
  const { stdout } = await run(join(VENV_BIN, 'perf_analyzer'), [...args, '-f', csv], { env: toolEnv(), timeout: 150_000, maxBuffer: 16 << 20 })
  const [head, ...lines] = readFileSync(csv, 'utf8').trim().split('\n')
  const names = head!.split(',')
  const rows = lines.map((l) => {
    const cells = l.split(',')
    const columns = Object.fromEntries(names.map((n, i) => [n, cells[i] ?? '']))
    return { concurrency: Number(columns['Concurrency']), throughput: Number(columns['Inferences/Second']), columns }
  })
  return { rows: rows.sort((a, b) => a.concurrency - b.concurrency), stdout }
}

/** Run a Python script from the venv; returns stdout (rejects with its output on failure). */
export async function python(script: string, args: string[]): Promise<string> {
  try {
    const { stdout } = await run(join(VENV_BIN, 'python'), [join(PY_DIR, script), ...args], { timeout: 150_000, maxBuffer: 16 << 20 })
    return stdout
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string }
    throw new Error(`${script} failed: ${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`)
  }
}
