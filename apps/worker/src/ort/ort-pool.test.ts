import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { buildMultiIoModel } from '@cohort/onnx-builder'
import { OrtPool } from './ort-pool.ts'

function modelFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cohort-pool-'))
  const p = join(dir, 'multi-io.onnx')
  writeFileSync(p, buildMultiIoModel())
  return p
}

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
      expect(started.message).toMatch(/^execution provider "cuda" is not available: .+ \(install the CUDA EP with `npm i onnxruntime-node --onnxruntime-node-install=cuda12`\)$/s)
      return
    }
    const r = await pool.run({
      x: { type: 'float32', dims: [1, 4], data: Float32Array.from([1, 1, 1, 1]) },
      ids: { type: 'int64', dims: [1, 3], data: BigInt64Array.from([1n, 2n, 3n]) },
    })
    expect(Array.from(r.outputs['y']!.data as Float32Array)).toEqual([3, 3, 3, 3])
    await pool.close()
  })
})
