/**
 * The served classifier file: trained on first use and cached, deterministically (every machine
 * and every process writes the same bytes; concurrent first uses race harmlessly through an
 * atomic rename).
 * @module
 */
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildClassifierModel } from './classifier.ts'
import { trainClassifier, type TrainResult } from './train.ts'

/** Bump when training or the graph changes, so stale cached files are not used. */
export const TEXT_MODEL_VERSION = 1

/** File name of the cached model. */
export const TEXT_MODEL_FILE = `text-classifier-v${TEXT_MODEL_VERSION}.onnx`

/** `<repo>/.cache/models`, or `COHORT_CACHE_DIR` when set (as for the demo model). */
export function textModelDir(): string {
  const env = process.env['COHORT_CACHE_DIR']
  return env ? resolve(env) : join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '.cache', 'models')
}

/**
 * Path of the trained classifier, training and writing it first when missing (a few seconds).
 * @param dir cache folder @default {@link textModelDir}
 */
export function ensureTextModel(dir = textModelDir()): string {
  const path = join(dir, TEXT_MODEL_FILE)
  if (!existsSync(path)) {
    writeModel(path)
  }
  return path
}

/** Train and write the classifier to `path` (atomically); returns the training result. */
export function writeModel(path: string): TrainResult {
  const r = trainClassifier()
  mkdirSync(dirname(path), { recursive: true })
  const tmp = `${path}.${process.pid}.tmp`
  writeFileSync(tmp, buildClassifierModel(r.weights))
  renameSync(tmp, path)
  return r
}
