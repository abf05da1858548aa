import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parseModelSpec } from './model-spec.ts'

const dir = mkdtempSync(join(tmpdir(), 'cohort-spec-'))
const file = join(dir, 'm.onnx')
writeFileSync(file, 'not read here')

describe('parseModelSpec per-model options', () => {
  it('reads batching flags and warm-up after the path', () => {
    const s = parseModelSpec(`a=${file},max-batch-size=4,max-delay-ms=2.5,policy=timer,no-auto-batch,warmup=3x1:8`)
    expect(s).toMatchObject({ name: 'a', path: file, warmup: { count: 3, sizes: [1, 8] } })
    expect(s.batching).toEqual({ maxBatchSize: 4, maxDelayMs: 2.5, policy: 'timer', autoBatchSize: false })
    expect(parseModelSpec(`${file},warmup=off`)).toMatchObject({ name: 'm', warmup: 'off', batching: {} })
  })

  it('refuses unknown keys and out-of-bounds values with the bound from the batching table', () => {
    expect(() => parseModelSpec(`a=${file},bogus=1`)).toThrow(/unknown option "bogus=1".*max-batch-size=V/)
    expect(() => parseModelSpec(`a=${file},max-batch-size=100000`)).toThrow(/max-batch-size .* from 1 to 65536/)
    expect(() => parseModelSpec(`a=${file},policy=fifo`)).toThrow(/one of eager, timer, deadline/)
    expect(() => parseModelSpec(`a=${file},warmup=lots`)).toThrow(/warmup/)
  })
})

describe('parseModelSpec forms', () => {
  it('explains NAME=PATH when given a bare name that is no file', () => {
    expect(() => parseModelSpec('resnet')).toThrow(/--model resnet: give NAME=PATH of an \.onnx file \(--model resnet=\.\/resnet\.onnx\)/)
    // A path with an extension that does not exist is a missing file, not a misuse of the form.
    expect(() => parseModelSpec(join(dir, 'gone.onnx'))).toThrow(/model file not found: .*gone\.onnx/)
    expect(() => parseModelSpec(`x=${join(dir, 'gone.onnx')}`)).toThrow(/model file not found/)
  })
})
