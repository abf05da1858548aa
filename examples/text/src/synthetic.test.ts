import { describe, expect, it } from 'vitest'
import { CLASS_WORDS, LABELS, syntheticDataset } from './synthetic.ts'

describe('syntheticDataset', () => {
  it('is deterministic per seed', () => {
    expect(syntheticDataset(50, { seed: 3 })).toEqual(syntheticDataset(50, { seed: 3 }))
    expect(syntheticDataset(50, { seed: 3 })).not.toEqual(syntheticDataset(50, { seed: 4 }))
  })

  it('is balanced and every text carries at least two words of its class', () => {
    const data = syntheticDataset(400)
    for (let c = 0; c < LABELS.length; c++) expect(data.filter((e) => e.label === c)).toHaveLength(100)
    for (const e of data) {
      const words = e.text.toLowerCase().replace(/\.$/, '').split(' ')
      const own = new Set(CLASS_WORDS[e.label])
      expect(words.filter((w) => own.has(w)).length, e.text).toBeGreaterThanOrEqual(2)
    }
  })

  it('keeps the class vocabularies disjoint', () => {
    const all = CLASS_WORDS.flat()
    expect(new Set(all).size).toBe(all.length)
  })
})
