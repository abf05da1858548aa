import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildDemoMlp } from '@cohort/onnx-builder'

/** Seed of the demo model's weights: the same file on every machine. */
export const DEMO_SEED = 42

/** Where generated models are cached: `<repo>/.cache/models` unless COHORT_CACHE_DIR is set. */
export function cacheDir(): string {
  const env = process.env['COHORT_CACHE_DIR']
  return env ? resolve(env) : join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '.cache', 'models')
}

/** Path of the demo MLP (256 -> 1024 -> 1024 -> 10), generated deterministically on first use. */
export function ensureDemoModel(): string {
  const path = join(cacheDir(), `demo-mlp-seed${DEMO_SEED}.onnx`)
  if (!existsSync(path)) {
    mkdirSync(dirname(path), { recursive: true })
    const tmp = `${path}.${process.pid}.tmp`
    writeFileSync(tmp, buildDemoMlp(DEMO_SEED))
    renameSync(tmp, path)
  }
  return path
}
