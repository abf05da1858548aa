import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** One perf_analyzer measurement (closed loop at a fixed concurrency, OIP over HTTP). */
export interface PaRow {
  concurrency: number
  /** Inferences per second (1 item per request). */
  throughput: number
  /** Client-side latency percentiles in ms. */
  p50Ms: number
  p99Ms: number
}

/**
 * The perf_analyzer of test/python/.venv (test/python/setup.sh installs it), with the environment
 * it needs (it links libcudart.so.12 from the nvidia-cuda-runtime wheel); undefined when absent.
 */
export function findPerfAnalyzer(root: string): { bin: string; env: NodeJS.ProcessEnv } | undefined {
  const venv = join(root, 'test/python/.venv')
  const bin = join(venv, 'bin/perf_analyzer')
  if (!existsSync(bin)) {
    return undefined
  }
  const libRoot = join(venv, 'lib')
  const py = readdirSync(libRoot).find((d) => d.startsWith('python3')) ?? 'python3'
  const lib = join(libRoot, py, 'site-packages/nvidia/cuda_runtime/lib')
  return { bin, env: { ...process.env, LD_LIBRARY_PATH: [lib, process.env['LD_LIBRARY_PATH']].filter(Boolean).join(':') } }
}

/** Parse perf_analyzer's `-f` CSV (latencies in µs) into rows sorted by concurrency. */
export function parsePaCsv(csv: string): PaRow[] {
  const [head, ...lines] = csv.trim().split('\n')
  const names = (head ?? '').split(',')
  const col = (cells: string[], name: string) => Number(cells[names.indexOf(name)])
  return lines
    .map((l) => l.split(','))
    .map((c) => ({ concurrency: col(c, 'Concurrency'), throughput: col(c, 'Inferences/Second'), p50Ms: col(c, 'p50 latency') / 1000, p99Ms: col(c, 'p99 latency') / 1000 }))
    .sort((a, b) => a.concurrency - b.concurrency)
}

/**
 * `perf_analyzer -m demo -u HOST:PORT -i http` at the given concurrencies (2 s windows, at most 6
 * trials each, stable within 50 %: the machine is shared), against an OIP server (Cohort or Triton). Rejects with its output on failure.
 */
export async function runPerfAnalyzer(pa: { bin: string; env: NodeJS.ProcessEnv }, base: string, concurrencies: number[]): Promise<PaRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'cohort-peers-pa-'))
  const csv = join(dir, 'pa.csv')
  const rows: PaRow[] = []
  try {
    for (const c of concurrencies) {
      const args = [
        '-m',
        'demo',
        '-u',
        new URL(base).host,
        '-i',
        'http',
        '-b',
        '1',
        '--concurrency-range',
        `${c}:${c}`,
        '--measurement-interval',
        '2000',
        '--max-trials',
        '6',
        '-s',
        '50',
        '-f',
        csv,
      ]
      await new Promise<void>((resolve, reject) =>
        execFile(pa.bin, args, { env: pa.env, timeout: 90_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
          err ? reject(new Error(`perf_analyzer at concurrency ${c}: ${`${stdout}\n${stderr}`.trim().split('\n').slice(-2).join(' ')}`)) : resolve(),
        ),
      )
      rows.push(...parsePaCsv(readFileSync(csv, 'utf8')))
    }
    return rows
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
