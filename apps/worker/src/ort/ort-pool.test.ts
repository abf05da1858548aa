import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { buildMlp, buildMultiIoModel } from '@cohort/onnx-builder'
import { OrtPool, defaultIntraOpThreads } from './ort-pool.ts'
import type { RestartReason } from '../runners/types.ts'

function modelFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cohort-pool-'))
  const p = join(dir, 'multi-io.onnx')
  writeFileSync(p, buildMultiIoModel())
  return p
}

/** An MLP whose run over many rows takes a while in native code (~2.2 M multiply-adds per row). */
function slowModelFile(): string {
  const p = join(mkdtempSync(join(tmpdir(), 'cohort-pool-')), 'slow.onnx')
  writeFileSync(p, buildMlp([64, 1024, 1024, 1024, 8]))
  return p
}

function rowsOf(n: number) {
  return { input: { type: 'float32', dims: [n, 64], data: new Float32Array(n * 64).fill(0.1) } }
}

function watch(pool: OrtPool): { restarting: RestartReason[]; restarted: RestartReason[] } {
  const ev = { restarting: [] as RestartReason[], restarted: [] as RestartReason[] }
  pool.observe({ restarting: (r) => ev.restarting.push(r), restarted: (r) => ev.restarted.push(r), restartFailed: () => undefined })
  return ev
}

async function until(cond: () => boolean, ms = 60_000): Promise<void> {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) {
      throw new Error('condition not met in time')
    }
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe('OrtPool restarts', () => {
  it('restarts an instance that died (its process was killed) instead of only skipping it', async () => {
    const pool = new OrtPool({ path: modelFile(), instances: 2, intraOpNumThreads: 1, processes: true })
    const ev = watch(pool)
    await pool.start()
    try {
      const [victim] = pool.pids
      process.kill(victim!, 'SIGKILL')
      await until(() => pool.live === 1)
      await until(() => pool.live === 2)
      expect(ev).toEqual({ restarting: ['died'], restarted: ['died'] })
      expect(pool.pids).not.toContain(victim)
      // Both slots serve: two runs at once.
      const feeds = (k: number) => ({
        x: { type: 'float32', dims: [1, 4], data: Float32Array.from([k, k, k, k]) },
        ids: { type: 'int64', dims: [1, 3], data: BigInt64Array.from([1n, 2n, 3n]) },
      })
      const [a, b] = await Promise.all([pool.run(feeds(1)), pool.run(feeds(2))])
      expect(Array.from(a.outputs['y']!.data as Float32Array)).toEqual([3, 3, 3, 3])
      expect(Array.from(b.outputs['y']!.data as Float32Array)).toEqual([5, 5, 5, 5])
    } finally {
      await pool.close()
    }
  })

  for (const processes of [true, false]) {
    it(`fails a run past its time limit with BATCH_TIMEOUT and replaces the instance (${processes ? 'process killed' : 'thread retired when its native run returns'})`, async () => {
      const pool = new OrtPool({ path: slowModelFile(), instances: 1, intraOpNumThreads: 1, processes })
      const ev = watch(pool)
      await pool.start()
      try {
        const pid = pool.pids[0]
        await expect(pool.run(rowsOf(20_000), { timeoutMs: 100 })).rejects.toMatchObject({ code: 'BATCH_TIMEOUT' })
        expect(pool.live).toBe(0)
        await until(() => pool.live === 1)
        expect(ev).toEqual({ restarting: ['batch_timeout'], restarted: ['batch_timeout'] })
        if (processes) {
          expect(pool.pids).not.toContain(pid)
        }
        const r = await pool.run(rowsOf(2))
        expect(r.outputs['logits']!.dims).toEqual([2, 8])
        // A thread is never terminated inside session.run() (that aborts the whole process when the
        // native call returns): this test process lives on past the abandoned run.
        await new Promise((res) => setTimeout(res, 200))
      } finally {
        await pool.close()
      }
    })
  }
})

describe('OrtPool', () => {
  for (const processes of [false, true]) {
    it(`runs two instances at once in ${processes ? 'child processes' : 'worker threads'}`, async () => {
      const pool = new OrtPool({ path: modelFile(), instances: 2, intraOpNumThreads: 1, processes })
      await pool.start()
      expect(pool.inputs.map((i) => [i.name, i.type, i.shape])).toEqual([
        ['x', 'float32', [-1, 4]],
        ['ids', 'int64', [-1, 3]],
      ])
      const feeds = (k: number) => ({
        x: { type: 'float32', dims: [1, 4], data: Float32Array.from([k, k, k, k]) },
        ids: { type: 'int64', dims: [1, 3], data: BigInt64Array.from([BigInt(k), 2n, 3n]) },
      })
      const [a, b] = await Promise.all([pool.run(feeds(1)), pool.run(feeds(5))])
      expect(Array.from(a.outputs['y']!.data as Float32Array)).toEqual([3, 3, 3, 3])
      expect(Array.from(b.outputs['y']!.data as Float32Array)).toEqual([11, 11, 11, 11])
      expect(Array.from(b.outputs['ids_sq']!.data as BigInt64Array)).toEqual([25n, 4n, 9n])
      await pool.close()
      await pool.close()
    })
  }

  it('fails to start with a clear message for a missing provider or a bad file', async () => {
    const bad = join(mkdtempSync(join(tmpdir(), 'cohort-pool-')), 'bad.onnx')
    writeFileSync(bad, new Uint8Array([1, 2, 3]))
    await expect(new OrtPool({ path: bad }).start()).rejects.toThrow(/cannot load model/)
  })

  it('names the CUDA provider when it is missing, and runs on it where it is installed', async () => {
    // Where the CUDA EP is installed (a GPU machine) the pool starts and serves; elsewhere the start
    // fails with the message that says what to install. Either way the outcome is checked.
    const pool = new OrtPool({ path: modelFile(), ep: 'cuda', intraOpNumThreads: 1 })
    const started = await pool.start().then(
      () => undefined,
      (e: unknown) => e as Error,
    )
    if (started) {
      expect(started.message).toMatch(
        /^execution provider "cuda" is not available: .+ \(the CUDA EP libraries are not installed by default: see "CPU by default, CUDA on request" in docs\/packages\.md\)$/s,
      )
      return
    }
    const r = await pool.run({
      x: { type: 'float32', dims: [1, 4], data: Float32Array.from([1, 1, 1, 1]) },
      ids: { type: 'int64', dims: [1, 3], data: BigInt64Array.from([1n, 2n, 3n]) },
    })
    expect(Array.from(r.outputs['y']!.data as Float32Array)).toEqual([3, 3, 3, 3])
    await pool.close()
  })

  it('leaves one core to the serving path by default: (cores - 1) / instances, at least 1', () => {
    expect(defaultIntraOpThreads(1, 2)).toBe(1)
    expect(defaultIntraOpThreads(1, 1)).toBe(1)
    expect(defaultIntraOpThreads(1, 16)).toBe(15)
    expect(defaultIntraOpThreads(2, 16)).toBe(7)
    expect(defaultIntraOpThreads(4, 2)).toBe(1)
  })

  for (const allowSpinning of [false, true]) {
    it(`loads and runs with intra-op spinning ${allowSpinning ? 'on' : 'off'}`, async () => {
      const pool = new OrtPool({ path: modelFile(), intraOpNumThreads: 2, allowSpinning })
      await pool.start()
      const r = await pool.run({
        x: { type: 'float32', dims: [1, 4], data: Float32Array.from([1, 1, 1, 1]) },
        ids: { type: 'int64', dims: [1, 3], data: BigInt64Array.from([1n, 2n, 3n]) },
      })
      expect(Array.from(r.outputs['y']!.data as Float32Array)).toEqual([3, 3, 3, 3])
      await pool.close()
    })
  }
})
