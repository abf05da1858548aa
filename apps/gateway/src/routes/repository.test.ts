import { describe, expect, it } from 'vitest'
import { mergeIndex } from './repository.ts'

describe('repository index over workers', () => {
  it('a version is READY when any worker serves it, else LOADING, else UNAVAILABLE with each distinct reason', () => {
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
      { name: 'm', version: '10', state: 'READY' },
    ])
  })
})
