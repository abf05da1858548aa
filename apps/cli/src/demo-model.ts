import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { HEAVY_MLP_SIZES, buildDemoMlp, buildMlp } from '@cohort/onnx-builder'

/** Seed of the demo model's weights: the same file on every machine. */
export const DEMO_SEED = 42

/** Where generated models are cached: `<repo>/.cache/models` unless COHORT_CACHE_DIR is set. */
export function cacheDir(): string {
  const env = process.env['COHORT_CACHE_DIR']
  return env ? resolve(env) : join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '.cache', 'models')
}

function ensure(file: string, build: () => Uint8Array): string {
  const path = join(cacheDir(), file)
  if (!existsSync(path)) {
    mkdirSync(dirname(path), { recursive: true })
    const tmp = `${path}.${process.pid}.tmp`
    writeFileSync(tmp, build())
    renameSync(tmp, path)
  }
  return path
}

/** Path of the demo MLP (256 -> 1024 -> 1024 -> 10), generated deterministically on first use. */
export function ensureDemoModel(): string {
  return ensure(`demo-mlp-seed${DEMO_SEED}.onnx`, () => buildDemoMlp(DEMO_SEED))
}

/** Path of the heavy benchmark MLP (512 -> 2560 x3 -> 16, ~14.5 M multiply-adds per item; 58 MB). */
export function ensureHeavyModel(): string {
  return ensure(`heavy-mlp-${HEAVY_MLP_SIZES.join('-')}.onnx`, () => buildMlp(HEAVY_MLP_SIZES))
}
