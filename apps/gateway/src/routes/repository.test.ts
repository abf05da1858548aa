import { describe, expect, it } from 'vitest'
import { mergeIndex } from './repository.ts'

describe('repository index over workers', () => {
  it('a version is READY only when every worker listing it serves it, and says which do not; else LOADING, else UNAVAILABLE with each distinct reason', () => {
    const merged = mergeIndex([
      {
        worker: 'w1',
        busy: [],
        models: [
          { name: 'm', version: '10', state: 'READY' },
          { name: 'm', version: '2', state: 'UNAVAILABLE', reason: 'not selected by the version policy (latest 1)' },
          { name: 'b', version: '1', state: 'UNAVAILABLE', reason: 'failed to load b/1/model.onnx: x' },
        ],
      },
      {
        worker: 'w2',
        busy: ['m'],
        models: [
          { name: 'm', version: '10', state: 'UNAVAILABLE', reason: 'failed to load m/10/model.onnx: y' },
          { name: 'm', version: '2', state: 'LOADING' },
          { name: 'b', version: '1', state: 'UNAVAILABLE', reason: 'b/config.json: bad' },
        ],
      },
    ])
    expect(merged).toEqual([
      { name: 'b', version: '1', state: 'UNAVAILABLE', reason: 'failed to load b/1/model.onnx: x; b/config.json: bad' },
      { name: 'm', version: '2', state: 'LOADING' },
      { name: 'm', version: '10', state: 'UNAVAILABLE', reason: 'ready on w1 only; w2 UNAVAILABLE: failed to load m/10/model.onnx: y' },
    ])
  })

  it('is READY when all workers serve it, LOADING while one still loads it, and covers only the workers that answer', () => {
    const w = (worker: string, state: 'READY' | 'LOADING' | 'UNAVAILABLE') => ({ worker, busy: [], models: [{ name: 'm', version: '1', state }] })
    expect(mergeIndex([w('w1', 'READY'), w('w2', 'READY')])).toEqual([{ name: 'm', version: '1', state: 'READY' }])
    expect(mergeIndex([w('w1', 'READY'), w('w2', 'LOADING')])).toEqual([{ name: 'm', version: '1', state: 'LOADING', reason: 'ready on w1 only; w2 LOADING' }])
    // w2 was lost mid-load: it no longer answers, and the index is what the workers left say.
    expect(mergeIndex([w('w1', 'READY')])).toEqual([{ name: 'm', version: '1', state: 'READY' }])
  })
})
