// ORT instance metrics: the pool's observer hook (runs, busy time, exits) and the OnnxRunner's
// counters in a registry, with real onnxruntime-node sessions.
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { buildMultiIoModel } from '@cohort/onnx-builder'
import { Registry, parsePrometheus } from '@cohort/metrics'
import { OrtPool } from './ort-pool.ts'
import { OnnxRunner } from '../runners/onnx-runner.ts'

function modelFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cohort-ort-metrics-'))
  const p = join(dir, 'multi-io.onnx')
  writeFileSync(p, buildMultiIoModel())
  return p
}

const feeds = (k: number) => ({
  x: { type: 'float32', dims: [1, 4], data: Float32Array.from([k, k, k, k]) },
  ids: { type: 'int64', dims: [1, 3], data: BigInt64Array.from([BigInt(k), 2n, 3n]) },
})

/** Pids of this process's children (Linux /proc). */
function childPids(): number[] {
  const out: number[] = []
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) {
      continue
    }
    try {
      // Field 4 of /proc/PID/stat (after the parenthesised name) is the parent pid.
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid === process.pid) {
        out.push(Number(d))
      }
    } catch {
      // gone meanwhile
    }
  }
  return out
}

describe('ORT instance metrics', () => {
  it('tells the observer about each run (instance, busy time, result), an instance that dies and its restart', async () => {
    const runs: { instance: number; busyMs: number; ok: boolean }[] = []
    const exits: number[] = []
    const restarts: number[] = []
    const before = new Set(childPids())
    const pool = new OrtPool({
      path: modelFile(),
      instances: 2,
      intraOpNumThreads: 1,
      processes: true,
      observer: { run: (instance, busyMs, ok) => runs.push({ instance, busyMs, ok }), exit: (i) => exits.push(i), restart: (i) => restarts.push(i) },
    })
    try {
      await pool.start()
      await Promise.all([pool.run(feeds(1)), pool.run(feeds(2))])
      expect(runs.map((r) => r.instance).sort()).toEqual([0, 1])
      expect(runs.every((r) => r.ok && r.busyMs > 0)).toBe(true)
      expect(pool.states()).toEqual({ live: 2, dead: 0 })
      const hosts = childPids().filter((p) => !before.has(p))
      expect(hosts).toHaveLength(2)
      process.kill(hosts[0]!, 'SIGKILL')
      const deadline = Date.now() + 10_000
      while (exits.length === 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20))
      }
      expect(exits).toHaveLength(1)
      while (restarts.length === 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20))
      }
      expect(restarts).toEqual([exits[0]]) // the replacement keeps the dead instance's number
      expect(pool.states()).toEqual({ live: 2, dead: 0 })
    } finally {
      await pool.close()
    }
    // Closing the pool is no death.
    expect(exits).toHaveLength(1)
  })

  it('counts runs, busy seconds and live instances of an ONNX model in the registry', async () => {
    // On the pool (inlineRunMs 0): the next test counts the inline lane's runs.
    const runner = new OnnxRunner({ name: 'mio', path: modelFile(), instances: 1, intraOpNumThreads: 1, inlineRunMs: 0 })
    const r = new Registry()
    runner.instrument(r)
    try {
      await runner.start()
      const afterStart = parsePrometheus(r.render())
      const warm = afterStart.get('cohort_ort_runs_total{instance="0",model="mio",result="ok"}') ?? 0
      const items = runner.prepare({ id: '1', model: 'mio', items: [{ x: [1, 1, 1, 1], ids: [1, 2, 3] }] } as never)
      await runner.runBatch(items.map((i) => i.payload))
      const m = parsePrometheus(r.render())
      expect(m.get('cohort_ort_runs_total{instance="0",model="mio",result="ok"}')).toBe(warm + 1)
      expect(m.get('cohort_ort_busy_seconds_total{instance="0",model="mio"}')!).toBeGreaterThan(afterStart.get('cohort_ort_busy_seconds_total{instance="0",model="mio"}') ?? 0)
      expect(m.get('cohort_ort_instances{model="mio",state="live"}')).toBe(1)
      expect(m.get('cohort_ort_instances{model="mio",state="dead"}')).toBe(0)
    } finally {
      await runner.close()
    }
  })

  it('counts the inline lane\'s runs and busy seconds as instance "inline"', async () => {
    const runner = new OnnxRunner({ name: 'mio', path: modelFile(), instances: 1, intraOpNumThreads: 1, inlineRunMs: 5 })
    const r = new Registry()
    runner.instrument(r)
    try {
      await runner.start()
      const items = runner.prepare({ id: '1', model: 'mio', items: [{ x: [1, 1, 1, 1], ids: [1, 2, 3] }] } as never)
      await runner.runBatch(items.map((i) => i.payload))
      const m = parsePrometheus(r.render())
      expect({ lane: runner.lanes.inline, runs: m.get('cohort_ort_runs_total{instance="inline",model="mio",result="ok"}') }).toEqual({ lane: 1, runs: 1 })
      expect(m.get('cohort_ort_busy_seconds_total{instance="inline",model="mio"}')!).toBeGreaterThan(0)
    } finally {
      await runner.close()
    }
  })
})
