import { describe, expect, it } from 'vitest'
import { hostDefault, modelsFromEnv } from './env-flags.ts'

describe('flags from the environment (containers)', () => {
  it('COHORT_HOST / COHORT_METRICS_HOST set the host default, else 127.0.0.1', () => {
    expect(hostDefault('COHORT_HOST', { COHORT_HOST: '0.0.0.0' })).toBe('0.0.0.0')
    expect(hostDefault('COHORT_METRICS_HOST', { COHORT_METRICS_HOST: '::' })).toBe('::')
    expect(hostDefault('COHORT_HOST', {})).toBe('127.0.0.1')
    expect(hostDefault('COHORT_HOST', { COHORT_HOST: ' ' })).toBe('127.0.0.1')
  })

  it('COHORT_MODELS gives whitespace-separated --model specs only when no model flag is given', () => {
    const v: Record<string, string | boolean | string[] | undefined> = {}
    modelsFromEnv(v, { COHORT_MODELS: ' demo\n a=/m/a.onnx,max-batch-size=4 ' })
    expect(v['model']).toEqual(['demo', 'a=/m/a.onnx,max-batch-size=4'])
    const given: Record<string, string | boolean | string[] | undefined> = { predictor: ['./p.ts'] }
    modelsFromEnv(given, { COHORT_MODELS: 'demo' })
    expect(given['model']).toBeUndefined()
    const flag: Record<string, string | boolean | string[] | undefined> = { model: ['b=/b.onnx'] }
    modelsFromEnv(flag, { COHORT_MODELS: 'demo' })
    expect(flag['model']).toEqual(['b=/b.onnx'])
  })

  it('COHORT_MODEL_REPOSITORY gives --model-repository unless the flag is there', () => {
    const v: Record<string, string | boolean | string[] | undefined> = {}
    modelsFromEnv(v, { COHORT_MODEL_REPOSITORY: '/models' })
    expect(v['model-repository']).toBe('/models')
    const flag: Record<string, string | boolean | string[] | undefined> = { 'model-repository': './repo' }
    modelsFromEnv(flag, { COHORT_MODEL_REPOSITORY: '/models' })
    expect(flag['model-repository']).toBe('./repo')
  })
})
