import { describe, expect, it } from 'vitest'
import { defineModelConfig, type ModelConfig } from '@cohort/predictor'
import { jsonSyntaxError, parseModelConfig, selectVersions } from './model-config.ts'

describe('repository config.json', () => {
  it('reads every field the per-model flags hold', () => {
    const c = parseModelConfig({
      versionPolicy: { latest: 2 },
      batching: { maxBatchSize: 4, maxDelayMs: 7, policy: 'timer', maxQueue: 100, sloMs: 250, admission: false },
      instances: 2,
      threads: 1,
      ep: 'cpu',
      processes: false,
      padding: { padValue: 0, maskInput: 'mask', buckets: [16, 8] },
      warmup: { count: 2, sizes: [1, 4] },
    })
    expect(c).toEqual({
      versionPolicy: { latest: 2 },
      batching: { maxBatchSize: 4, maxDelayMs: 7, policy: 'timer', maxQueue: 100, sloMs: 250, admission: false },
      instances: 2,
      threads: 1,
      ep: 'cpu',
      processes: false,
      padding: { padValue: 0, maskInput: 'mask', buckets: [8, 16] },
      warmup: { count: 2, sizes: [1, 4] },
    })
    expect(parseModelConfig(undefined)).toEqual({ versionPolicy: { latest: 1 }, batching: {} })
    expect(parseModelConfig({ versionPolicy: 'all', warmup: 'off' })).toMatchObject({ versionPolicy: { all: true }, warmup: 'off' })
    expect(parseModelConfig({ versionPolicy: { specific: [3, '1'] } }).versionPolicy).toEqual({ specific: ['3', '1'] })
  })

  it('config.ts: defineModelConfig of @cohort/predictor types the same object, validated the same way', () => {
    const c = defineModelConfig({ versionPolicy: { specific: [2, '1'] }, batching: { maxBatchSize: 8, policy: 'deadline', sloMs: 200 } })
    expect(parseModelConfig(c, 'config.ts')).toEqual({ versionPolicy: { specific: ['2', '1'] }, batching: { maxBatchSize: 8, policy: 'deadline', sloMs: 200 } })
    // The type refuses what the parser refuses by name (tsc checks this file).
    // @ts-expect-error unknown field
    const bad: ModelConfig = { maxBatchSize: 4 }
    expect(() => parseModelConfig(bad, 'config.ts')).toThrow(/unknown field "maxBatchSize"/)
    // @ts-expect-error unknown batching field
    const badBatch: ModelConfig = { batching: { nope: 1 } }
    expect(() => parseModelConfig(badBatch, 'config.ts')).toThrow(/batching: unknown batching setting "nope"/)
  })

  it('refuses bad values with the field, the value and what is expected', () => {
    const bad: [unknown, RegExp][] = [
      [[], /must hold a JSON object/],
      [{ maxBatchSize: 4 }, /unknown field "maxBatchSize" \(known: versionPolicy, batching/],
      [{ batching: { maxBatchSize: 100_000 } }, /batching: invalid value for maxBatchSize: 100000/],
      [{ batching: { nope: 1 } }, /batching: unknown batching setting "nope"/],
      [{ instances: 0 }, /instances must be an integer from 1 to 64, got 0/],
      [{ ep: 'tpu' }, /ep must be one of cpu, webgpu, cuda, got "tpu"/],
      [{ versionPolicy: { latest: 0 } }, /versionPolicy.latest must be an integer from 1/],
      [{ versionPolicy: { specific: ['01'] } }, /versionPolicy.specific must list versions/],
      [{ versionPolicy: 'newest' }, /versionPolicy: expected/],
      [{ padding: { buckets: [0] } }, /padding.buckets must be a list of integers >= 1/],
      [{ padding: { pad: 1 } }, /unknown field padding.pad/],
      [{ warmup: 3 }, /warmup must be "off" or/],
    ]
    for (const [raw, re] of bad) {
      expect(() => parseModelConfig(raw), JSON.stringify(raw)).toThrow(re)
    }
  })

  it('selects versions by policy, newest first (numerically, not as text)', () => {
    const on = ['1', '2', '10', '9']
    expect(selectVersions({ latest: 1 }, on)).toEqual(['10'])
    expect(selectVersions({ latest: 2 }, on)).toEqual(['10', '9'])
    expect(selectVersions({ all: true }, on)).toEqual(['10', '9', '2', '1'])
    expect(selectVersions({ specific: ['1', '9', '7'] }, on)).toEqual(['9', '1'])
    expect(selectVersions({ latest: 3 }, [])).toEqual([])
  })
})

describe('parseModelConfig reports every bad field at once, with its line', () => {
  it('names each field and its line in config.json', () => {
    const text = '{\n  "instances": 0,\n  "ep": "tpu",\n  "threads": 2,\n  "bogus": 1\n}\n'
    let msg = ''
    try {
      parseModelConfig(JSON.parse(text), 'config.json', text)
    } catch (e) {
      msg = (e as Error).message
    }
    expect(msg).toContain('line 5: unknown field "bogus"')
    expect(msg).toContain('line 2: instances must be an integer from 1 to 64, got 0')
    expect(msg).toContain('line 3: ep must be one of cpu, webgpu, cuda, got "tpu"')
    expect(msg).not.toMatch(/line 4/)
  })

  it('gives the line of a JSON syntax error', () => {
    const text = '{\n  "instances": 2,\n  "ep": cpu\n}\n'
    let err: unknown
    try {
      JSON.parse(text)
    } catch (e) {
      err = e
    }
    expect(jsonSyntaxError(text, err).message).toMatch(/^line 3: /)
    const trailing = '{\n  "instances": 2\n}\n,\n'
    try {
      JSON.parse(trailing)
    } catch (e) {
      err = e
    }
    expect(jsonSyntaxError(trailing, err).message).toMatch(/^line 4: /)
  })
})
