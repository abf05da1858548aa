/**
 * The tabular example's model: a seeded MLP FEATURES -> 64 -> 64 -> 2 built with
 * @cohort/onnx-builder, written once to `.cache/` next to this file (the same bytes everywhere).
 * Run `npx tsx examples/tabular/model.ts` to build it ahead of time.
 * @module
 */
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildMlp } from '@cohort/onnx-builder'
import { FEATURES } from './features.ts'

/** Layer sizes of the MLP. */
export const TABULAR_MLP_SIZES = [FEATURES, 64, 64, 2] as const
/** Seed of its weights. */
export const TABULAR_SEED = 2912

/** Path of the model relative to the config file's folder. */
export const MODEL_FILE = `.cache/tabular-mlp-${TABULAR_MLP_SIZES.join('-')}-seed${TABULAR_SEED}.onnx`

/** Build the model file if missing; returns its absolute path. */
export function ensureTabularModel(): string {
  const path = join(dirname(fileURLToPath(import.meta.url)), MODEL_FILE)
  if (!existsSync(path)) {
    mkdirSync(dirname(path), { recursive: true })
    const tmp = `${path}.${process.pid}.tmp`
    writeFileSync(tmp, buildMlp(TABULAR_MLP_SIZES, TABULAR_SEED))
    renameSync(tmp, path)
  }
  return path
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  console.log(ensureTabularModel())
}
