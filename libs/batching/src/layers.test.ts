import { describe, expect, it } from 'vitest'
import { layerBatching } from './layers.ts'

describe('layerBatching', () => {
  it('applies file < flags < runtime whatever the order given, and names the source of each field', () => {
    const r = layerBatching([
      { source: 'runtime', values: { maxBatchSize: 8 } },
      { source: 'flags', values: { maxBatchSize: 4, policy: 'timer' } },
      { source: 'model', values: { maxBatchSize: 256, maxDelayMs: 5 } },
      { source: 'file', values: { maxBatchSize: 2, maxQueue: 10 } },
    ])
    expect(r.config.maxBatchSize).toBe(8)
    expect(r.sources).toMatchObject({ maxBatchSize: 'runtime', policy: 'flags', maxQueue: 'file', maxDelayMs: 'model', admission: 'default' })
  })

  it('restores the next lower layer when a field leaves the runtime layer', () => {
    const flags = { source: 'flags' as const, values: { maxBatchSize: 4 } }
    expect(layerBatching([flags, { source: 'runtime', values: { maxBatchSize: 9 } }]).config.maxBatchSize).toBe(9)
    const reset = layerBatching([flags, { source: 'runtime', values: {} }])
    expect(reset.config.maxBatchSize).toBe(4)
    expect(reset.sources.maxBatchSize).toBe('flags')
  })

  it('within one source a later layer wins (global flags, then per-model flags)', () => {
    const r = layerBatching([
      { source: 'flags', values: { maxBatchSize: 16 } },
      { source: 'flags', values: { maxBatchSize: 4 } },
    ])
    expect(r.config.maxBatchSize).toBe(4)
  })

  it('refuses an out-of-bounds value with the table bound', () => {
    expect(() => layerBatching([{ source: 'runtime', values: { maxBatchSize: 100_000 } }])).toThrow(/65536/)
  })
})
