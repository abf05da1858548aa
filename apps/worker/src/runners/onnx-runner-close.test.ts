// OnnxRunner.close() while start() is still running (its session loading, its warm-up and inline
// lane runs): the process then exits cleanly. Ending ONNX Runtime with a native call in flight
// aborted it at exit (SIGABRT, "terminate called after throwing an instance of 'Napi::Error'"),
// as a worker SIGTERMed during a repository load did (test/e2e/repository-workers.test.ts). One
// child process per delay, so the exit comes at each step of start().
import { spawn } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { buildMlp } from '@cohort/onnx-builder'

const CHILD = fileURLToPath(new URL('./onnx-runner-close.child.ts', import.meta.url))

function run(path: string, delayMs: number): Promise<{ delayMs: number; code: number | null; signal: string | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['--import', 'tsx', CHILD, path, String(delayMs)], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    p.stdout.on('data', (d: Buffer) => (out += d.toString()))
    p.stderr.on('data', (d: Buffer) => (out += d.toString()))
    p.on('close', (code, signal) => resolve({ delayMs, code, signal, out: out.trim().slice(-400) }))
  })
}

describe('OnnxRunner.close() during start()', () => {
  it('waits for start() to stop at its next step, so exiting right after never aborts the process', { timeout: 120_000 }, async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'cohort-close-')), 'm.onnx')
    writeFileSync(path, buildMlp([64, 256, 256, 8]))
    const delays = [0, 50, 100, 150, 200, 250, 300, 400]
    const results: Awaited<ReturnType<typeof run>>[] = []
    for (let i = 0; i < delays.length; i += 2) {
      results.push(...(await Promise.all(delays.slice(i, i + 2).map((d) => run(path, d)))))
    }
    const bad = results.filter((r) => r.code !== 0)
    expect(bad, JSON.stringify(bad)).toEqual([])
    // Each either finished starting or was stopped by the close, and said so.
    for (const r of results) {
      expect(r.out).toMatch(/^(started|start failed: model "m" was closed while it started)$/m)
    }
  })
})
