import { extname, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { Generator, GenerativeSlo } from '@cohort/protocol'
import { GenerativeRunner, type GeneratorFactory } from './runners/generative-runner.ts'

/**
 * The runner of `--generative NAME=PATH`: PATH is a generator module (`.ts` through tsx, `.js`,
 * `.mjs`) whose default export is a {@link GeneratorFactory} (bring your own generator), or an ONNX
 * decoder (`.onnx`), run by `createOnnxGenerator` (`./generative`, the `@cohort/generative` engine).
 * The module is imported (and the factory called) at `start()`.
 */
export function generativeRunner(name: string, path: string, slo?: GenerativeSlo): GenerativeRunner {
  const ext = extname(path).toLowerCase()
  if (ext === '.onnx') {
    return new GenerativeRunner(name, () => onnxGenerator(name, path, slo))
  }
  if (!['.ts', '.mts', '.js', '.mjs'].includes(ext)) {
    throw new Error(`--generative ${name}=${path}: PATH must be a generator module (.ts, .js, .mjs) or an ONNX decoder (.onnx)`)
  }
  return new GenerativeRunner(name, () => loadGenerator(name, path))
}

/** Import a generator module and call its default export (a {@link GeneratorFactory}). */
export async function loadGenerator(name: string, path: string): Promise<Generator> {
  let mod: { default?: unknown }
  try {
    mod = (await import(pathToFileURL(resolve(path)).href)) as { default?: unknown }
  } catch (e) {
    throw new Error(`cannot load generator module ${path}: ${e instanceof Error ? e.message : String(e)}`)
  }
  if (typeof mod.default !== 'function') {
    throw new Error(`${path} must default-export a generator factory: export default ({ name, path }) => Generator (docs/generative.md#bring-your-own-generator)`)
  }
  const g = (await (mod.default as GeneratorFactory)({ name, path })) as Partial<Generator> | undefined
  if (!g || typeof g.submit !== 'function' || typeof g.close !== 'function' || typeof g.info?.maxContext !== 'number') {
    throw new Error(`${path}: the factory must return a Generator ({ info: { maxContext, vocabSize }, submit, close })`)
  }
  return g as Generator
}

/** An ONNX decoder through `@cohort/generative`'s engine in an ORT worker thread (docs/generative.md). */
async function onnxGenerator(_name: string, path: string, slo: GenerativeSlo | undefined): Promise<Generator> {
  // Imported on first use: gpt-tokenizer and the engine load only for generative models.
  const { createOnnxGenerator } = await import('./generative/index.ts')
  return createOnnxGenerator(path, slo ? { slo } : {})
}
