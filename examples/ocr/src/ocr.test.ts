// The OCR pipeline in process, with the real PaddleOCR v4 models through onnxruntime-node (a small
// ORT runner stands in for the worker's, so this runs without NATS or the CLI).
import { readFileSync } from 'node:fs'
import ort from 'onnxruntime-node'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PipelineExecutor, type ItemTensor, type LeafStage, type StageRunner } from '@cohort/pipeline'
import config from '../cohort.config.ts'
import { HELLO_PNG_URL, TEST_LINES } from '../test/hello.ts'
import { ifStarted } from '@cohort/test-support'

/** Per ONNX stage, its batches: the number of items and their distinct item shapes. */
const batches = new Map<string, { rows: number; shapes: string[] }[]>()

function ortRunner(stage: LeafStage): StageRunner | undefined {
  if (stage.kind !== 'onnx') {
    return undefined
  }
  let session: ort.InferenceSession | undefined
  return {
    concurrency: 1,
    start: async () => {
      session = await ort.InferenceSession.create(stage.model)
    },
    run: async (items) => {
      const rows = items as Record<string, ItemTensor>[]
      const shapes = [...new Set(rows.map((r) => Object.values(r)[0]!.shape.join('x')))]
      batches.set(stage.name, [...(batches.get(stage.name) ?? []), { rows: rows.length, shapes }])
      const feeds: Record<string, ort.Tensor> = {}
      for (const name of Object.keys(rows[0]!)) {
        const shape = rows[0]![name]!.shape
        const size = shape.reduce((a, b) => a * b, 1)
        const data = new Float32Array(rows.length * size)
        rows.forEach((r, i) => data.set(r[name]!.data as Float32Array, i * size))
        feeds[name] = new ort.Tensor('float32', data, [rows.length, ...shape])
      }
      const out = await session!.run(feeds)
      return rows.map((_, i) => {
        const res: Record<string, ItemTensor> = {}
        for (const [name, t] of Object.entries(out)) {
          const shape = t.dims.slice(1)
          const size = shape.reduce((a, b) => a * b, 1)
          res[name] = { datatype: 'FP32', shape, data: (t.data as Float32Array).slice(i * size, (i + 1) * size) }
        }
        return res
      })
    },
    close: async () => {
      await session?.release()
    },
  }
}

const image = `data:image/png;base64,${readFileSync(HELLO_PNG_URL).toString('base64')}`
const ocr = config.models.find((m) => m.name === 'ocr')!
const request = (img: string) => ({ image: img, maxSide: 960, minScore: 0.5 })

// Real models on a shared 2-core machine: generous timeouts, no timing assertions.
describe('the OCR pipeline with the packaged PaddleOCR v4 models', { timeout: 60_000 }, () => {
  let ex: PipelineExecutor
  beforeAll(async () => {
    ex = new PipelineExecutor({ pipeline: ocr, runnerFor: ortRunner })
    await ex.start()
  }, 60_000)
  afterAll(async () => {
    await ifStarted(ex)?.close()
  })

  it('reads the test image line by line, top to bottom', async () => {
    const out = (await ex.run(request(image), Date.now() + 30_000)) as { lines: { text: string; score: number; box: number[][] }[] }
    expect(out).not.toBeInstanceOf(Error)
    expect(out.lines.map((l) => l.text.toLowerCase())).toEqual(TEST_LINES.map((l) => l.toLowerCase()))
    for (const l of out.lines) {
      expect(l.score).toBeGreaterThan(0.8)
      expect(l.box).toHaveLength(4)
    }
    const tops = out.lines.map((l) => l.box[0]![1]!)
    expect([...tops].sort((a, b) => a - b)).toEqual(tops)
  })

  it('fails a bad image alone, with INVALID_INPUT, while other items in flight succeed', async () => {
    const [bad, good, notImage] = await Promise.all([
      ex.run(request('data:image/png;base64,@@@garbage@@@'), Date.now() + 30_000),
      ex.run(request(image), Date.now() + 30_000),
      ex.run(request(`data:image/png;base64,${Buffer.from('plain text').toString('base64')}`), Date.now() + 30_000),
    ])
    expect(bad).toMatchObject({ code: 'INVALID_INPUT' })
    expect(notImage).toMatchObject({ code: 'INVALID_INPUT' })
    expect((good as { lines: { text: string }[] }).lines.map((l) => l.text)).toEqual([...TEST_LINES])
  })

  it('batches recognition across the boxes of several requests, one width bucket per batch', async () => {
    batches.clear()
    const outs = await Promise.all(Array.from({ length: 3 }, () => ex.run(request(image), Date.now() + 30_000)))
    for (const o of outs) {
      expect((o as { lines: { text: string }[] }).lines.map((l) => l.text)).toEqual([...TEST_LINES])
    }
    const rec = batches.get('rec')!
    expect(rec.reduce((n, b) => n + b.rows, 0)).toBe(9)
    // Each batch holds one width bucket; the test image's lines fall in two (384 and 256 wide).
    expect(rec.every((b) => b.shapes.length === 1)).toBe(true)
    expect(new Set(rec.map((b) => b.shapes[0])).size).toBe(2)
    // 9 crops (3 per request) ran in batches of more than one request's boxes.
    expect(Math.max(...rec.map((b) => b.rows))).toBeGreaterThan(2)
  })

  it('reads the same text from a JPEG (quality 50) of the test image, and with pixel noise', async () => {
    const [{ PNG }, { default: jpeg }] = await Promise.all([import('pngjs'), import('jpeg-js')])
    const png = PNG.sync.read(readFileSync(HELLO_PNG_URL))
    const rgba = { width: png.width, height: png.height, data: png.data }
    const jpg = `data:image/jpeg;base64,${Buffer.from(jpeg.encode(rgba, 50).data).toString('base64')}`
    // +-30 levels of uniform noise on R, G and B (MINSTD with a fixed seed: the same draw every run)
    let seed = 7
    const noise = () => ((seed = (seed * 48271) % 2147483647) / 2147483647 - 0.5) * 60
    const noisy = Buffer.from(png.data.map((v, i) => (i % 4 === 3 ? v : Math.max(0, Math.min(255, Math.round(v + noise()))))))
    const noisyPng = new PNG({ width: png.width, height: png.height })
    noisyPng.data = noisy
    const noisyUrl = `data:image/png;base64,${PNG.sync.write(noisyPng).toString('base64')}`
    const outs = await Promise.all([jpg, noisyUrl].map((u) => ex.run(request(u), Date.now() + 30_000)))
    for (const out of outs) {
      expect((out as { lines: { text: string }[] }).lines.map((l) => l.text)).toEqual([...TEST_LINES])
    }
  })

  it('gives an empty list for an image without text', async () => {
    const { PNG } = await import('pngjs')
    const blank = new PNG({ width: 64, height: 64 })
    blank.data.fill(255)
    const out = await ex.run(request(`data:image/png;base64,${PNG.sync.write(blank).toString('base64')}`), Date.now() + 30_000)
    expect(out).toEqual({ lines: [] })
  })
})
