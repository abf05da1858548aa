// Triton's own clients, unmodified, against a live Cohort stack (nats-server + worker + gateway
// processes): tritonclient.http and tritonclient.grpc (triton_clients.py checks every answer) and
// perf_analyzer over HTTP and gRPC. Needs test/python/.venv (setup.sh; .ci/run creates it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ensureVenv, perfAnalyzer, python, startStack, writeDemoExpectations, type Stack } from './harness.ts'
import { ifStarted } from '@cohort/test-support'

interface Check {
  check: string
  ok: boolean
}

describe('Triton clients against the gateway', () => {
  let stack: Stack

  beforeAll(async () => {
    await ensureVenv()
    stack = await startStack()
  })

  afterAll(async () => {
    await ifStarted(stack)?.close()
  })

  it('tritonclient.http and tritonclient.grpc: health, metadata, config, stats, FP32/INT64/BYTES/FP16 and every datatype, binary and JSON, streaming', async () => {
    const out = await python('triton_clients.py', ['--http', stack.http, '--grpc', stack.grpc, '--expect', writeDemoExpectations()])
    const lines = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Check | { done: true }) // a line per check, then the end
    expect(lines.at(-1)).toEqual({ done: true })
    const checks = lines.filter((l) => 'check' in l)
    expect(checks.filter((c) => !c.ok)).toEqual([])
    const names = checks.map((c) => c.check)
    for (const dt of ['FP32', 'INT64', 'BYTES', 'FP16']) {
      expect(names).toContain(`http identity ${dt} binary=True`)
      expect(names).toContain(`http identity ${dt} binary=False`)
      expect(names).toContain(`grpc identity ${dt}`)
    }
    expect(names).toContain('grpc stream infer')
    expect(checks.length).toBeGreaterThan(60)
  })

  it.each([
    ['http', () => stack.http, [] as string[]],
    ['grpc', () => stack.grpc, ['-i', 'grpc']],
  ])('perf_analyzer over %s: concurrency 1..4 completes with throughput and server-side stats', async (_kind, url, extra) => {
    const before = await statsSuccess(stack.http)
    const { rows, stdout } = await perfAnalyzer([
      '-m',
      'demo',
      '-u',
      url(),
      ...extra,
      '--concurrency-range',
      '1:4',
      '--measurement-interval',
      '1000',
      // The CPUs are shared with other suites: accept any latency spread (ratios are not measured here).
      '-s',
      '1000',
    ])
    expect(rows.map((r) => r.concurrency)).toEqual([1, 2, 3, 4])
    for (const r of rows) {
      expect(r.throughput).toBeGreaterThan(0)
      // Present only when perf_analyzer read /stats (ModelStatistics) around each measurement.
      expect(Number(r.columns['Server Compute Infer'])).toBeGreaterThan(0)
    }
    expect(stdout).not.toMatch(/error|failed/i)
    expect(await statsSuccess(stack.http)).toBeGreaterThan(before)
  })
})

async function statsSuccess(http: string): Promise<number> {
  const r = await fetch(`http://${http}/v2/models/demo/stats`)
  const body = (await r.json()) as { model_stats: { inference_stats: { success: { count: number } } }[] }
  return body.model_stats[0]!.inference_stats.success.count
}
