import { describe, expect, it } from 'vitest'
import {
  BATCHING_KEYS,
  DEFAULT_BATCHING,
  MAX_BATCH_SIZE_LIMIT,
  batchingToJson,
  isBatchingKey,
  parseBatchingPatch,
  resolveBatchingConfig,
  validateBatchingConfig,
} from './config.ts'
import { harness, pushAll } from './test-harness.ts'

describe('batching config', () => {
  it('has the documented, frozen defaults', () => {
    expect(DEFAULT_BATCHING).toEqual({
      maxBatchSize: 32,
      maxDelayMs: 5,
      policy: 'eager',
      maxQueue: 4096,
      maxBatchCost: Infinity,
      admission: true,
      autoBatchSize: false,
      sloMs: 0,
      maxTenantQueue: 0,
    })
    expect(Object.isFrozen(DEFAULT_BATCHING)).toBe(true)
  })

  it('merges a patch over a base, keeping fields that are absent or undefined', () => {
    const c = resolveBatchingConfig({ maxBatchSize: 8, maxDelayMs: undefined })
    expect(c).toEqual({ ...DEFAULT_BATCHING, maxBatchSize: 8 })
    expect(Object.isFrozen(c)).toBe(true)
    expect(resolveBatchingConfig({ policy: 'timer' }, c)).toEqual({ ...c, policy: 'timer' })
  })

  it('ignores keys that are not batching knobs', () => {
    const c = resolveBatchingConfig({ concurrency: 3, maxQueue: 7 } as never)
    expect(c).toEqual({ ...DEFAULT_BATCHING, maxQueue: 7 })
  })

  it.each([
    { maxBatchSize: 0 },
    { maxBatchSize: -1 },
    { maxBatchSize: 1.5 },
    { maxBatchSize: Number.NaN },
    { maxDelayMs: -1 },
    { maxDelayMs: Number.NaN },
    { maxQueue: 0 },
    { maxQueue: 2.5 },
    { policy: 'fifo' },
    { policy: 'EAGER' },
    { maxBatchCost: 0 },
    { maxBatchCost: -5 },
    { maxBatchCost: Number.NaN },
    { maxBatchCost: '8' },
    { admission: 'yes' },
    { maxBatchSize: MAX_BATCH_SIZE_LIMIT + 1 },
    { maxQueue: 1_048_577 },
    { maxDelayMs: 3_600_001 },
    { autoBatchSize: 1 },
  ])('rejects %o with a RangeError', (patch) => {
    expect(() => resolveBatchingConfig(patch as never)).toThrow(RangeError)
    expect(() => validateBatchingConfig({ ...DEFAULT_BATCHING, ...patch } as never)).toThrow(RangeError)
  })

  it('accepts the boundaries', () => {
    expect(() => resolveBatchingConfig({ maxBatchSize: 1, maxDelayMs: 0, maxQueue: 1 })).not.toThrow()
    expect(() => resolveBatchingConfig({ maxDelayMs: Infinity })).not.toThrow()
    expect(resolveBatchingConfig({ policy: 'deadline', maxBatchCost: 0.5 })).toMatchObject({
      policy: 'deadline',
      maxBatchCost: 0.5,
    })
  })

  it('fills maxBatchCost from an older base config that lacks it', () => {
    const old = { maxBatchSize: 8, maxDelayMs: 5, policy: 'eager' as const, maxQueue: 10 }
    expect(() => validateBatchingConfig(old)).not.toThrow()
    expect(resolveBatchingConfig({}, old)).toEqual({ ...old, maxBatchCost: Infinity, admission: true, autoBatchSize: false, sloMs: 0, maxTenantQueue: 0 })
  })
})

describe('the batching field table', () => {
  it('knows exactly the BatchingConfig fields, in one list', () => {
    expect([...BATCHING_KEYS].sort()).toEqual(Object.keys(DEFAULT_BATCHING).sort())
  })

  it.each(['toString', 'constructor', 'valueOf', '__proto__', 'hasOwnProperty'])('treats the inherited name %s as unknown', (k) => {
    expect(isBatchingKey(k)).toBe(false)
    // JSON.parse makes `__proto__` an own key, as an HTTP body would.
    const body = JSON.parse(`{${JSON.stringify(k)}: 1}`) as unknown
    expect(() => parseBatchingPatch(body)).toThrow(RangeError)
    expect(() => parseBatchingPatch(body)).toThrow(/unknown batching setting/)
  })

  it('reads a JSON patch: null clears maxBatchCost, bounds apply, messages name the field and the range', () => {
    expect(parseBatchingPatch({ maxBatchSize: 8, maxBatchCost: null, policy: 'timer' })).toEqual({ maxBatchSize: 8, maxBatchCost: Infinity, policy: 'timer' })
    expect(() => parseBatchingPatch({ maxBatchSize: MAX_BATCH_SIZE_LIMIT + 1 })).toThrow(/maxBatchSize: 65537 \(expected an integer from 1 to 65536\)/)
    expect(parseBatchingPatch({ maxBatchSize: MAX_BATCH_SIZE_LIMIT })).toEqual({ maxBatchSize: MAX_BATCH_SIZE_LIMIT })
    expect(() => parseBatchingPatch({ maxDelayMs: null }, { strict: true })).toThrow(/maxDelayMs/)
    expect(parseBatchingPatch({ maxDelayMs: null })).toEqual({})
    expect(() => parseBatchingPatch([1])).toThrow(/JSON object/)
    expect(() => parseBatchingPatch({ admission: 'true' })).toThrow(/admission/)
  })

  it('writes JSON with Infinity as null, every field present', () => {
    expect(batchingToJson(DEFAULT_BATCHING)).toEqual({
      maxBatchSize: 32,
      maxDelayMs: 5,
      policy: 'eager',
      maxQueue: 4096,
      maxBatchCost: null,
      admission: true,
      autoBatchSize: false,
      sloMs: 0,
      maxTenantQueue: 0,
    })
    expect(JSON.parse(JSON.stringify(batchingToJson({ maxBatchCost: 7 })))).toMatchObject({ maxBatchCost: 7, maxBatchSize: null })
  })
})

describe('BatchEngine.configure', () => {
  it('validates, leaving the config unchanged on error', () => {
    const h = harness({ maxBatchSize: 4 })
    const before = h.engine.config
    expect(() => h.engine.configure({ maxBatchSize: 0 })).toThrow(RangeError)
    expect(() => h.engine.configure({ maxDelayMs: -1 })).toThrow(RangeError)
    expect(() => h.engine.configure({ maxQueue: 0 })).toThrow(RangeError)
    expect(() => h.engine.configure({ policy: 'lifo' as never })).toThrow(RangeError)
    expect(() => h.engine.configure({ maxBatchCost: -1 })).toThrow(RangeError)
    expect(() => h.engine.configure({ maxBatchSize: 2, maxQueue: 0 })).toThrow(RangeError)
    expect(h.engine.config).toBe(before)
    expect(Object.isFrozen(h.engine.config)).toBe(true)
  })

  it('applies a patch to the current config', () => {
    const h = harness({ maxBatchSize: 4 })
    h.engine.configure({ maxDelayMs: 9 })
    expect(h.engine.config).toEqual({ ...DEFAULT_BATCHING, maxBatchSize: 4, maxDelayMs: 9 })
  })

  it('lowering maxBatchSize while items are queued splits the next batch', async () => {
    const h = harness()
    pushAll(h, 'a')
    h.clock.flushDefers()
    pushAll(h, 'b', 'c', 'd', 'e', 'f')
    h.engine.configure({ maxBatchSize: 2 })
    await h.complete()
    expect(h.items()).toEqual([['a'], ['b', 'c']])
    h.engine.configure({ maxBatchSize: 10 })
    await h.complete()
    expect(h.items()[2]).toEqual(['d', 'e', 'f'])
  })

  it('lowering maxQueue refuses pushes until the queue is shorter', async () => {
    const h = harness()
    pushAll(h, 'a')
    h.clock.flushDefers()
    pushAll(h, 'b', 'c', 'd')
    h.engine.configure({ maxQueue: 2 })
    expect(h.engine.queued).toBe(3)
    expect(h.engine.push({ value: 'x', deadline: Infinity })).toBe(false)
    await h.complete()
    expect(h.engine.push({ value: 'y', deadline: Infinity })).toBe(true)
  })

  it('schedules nothing when the queue is empty', () => {
    const h = harness()
    h.engine.configure({ policy: 'timer' })
    expect(h.clock.pendingDefers).toBe(0)
    expect(h.clock.timers).toHaveLength(0)
  })
})
