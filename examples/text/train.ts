/**
 * Trains the text classifier on the synthetic AG-News-like set and writes it as ONNX:
 *
 *     npx tsx examples/text/train.ts [--out path/to/model.onnx]
 *
 * Without --out it writes the cached file the config serves (`.cache/models/text-classifier-v1.onnx`).
 * Deterministic: the same bytes on every run.
 * @module
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { TEXT_MODEL_FILE, textModelDir, writeModel } from './src/model-file.ts'

const outIdx = process.argv.indexOf('--out')
const out = outIdx > 0 && process.argv[outIdx + 1] ? resolve(process.argv[outIdx + 1] as string) : join(textModelDir(), TEXT_MODEL_FILE)
const t0 = performance.now()
const r = writeModel(out)
const ms = Math.round(performance.now() - t0)
const sha = createHash('sha256').update(readFileSync(out)).digest('hex').slice(0, 16)
console.log(`trained in ${ms} ms: loss ${r.loss.toFixed(4)}, train accuracy ${r.trainAccuracy.toFixed(4)}`)
console.log(`wrote ${out} (sha256 ${sha}...)`)
