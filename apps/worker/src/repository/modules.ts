import { createRequire } from 'node:module'
import { basename, dirname } from 'node:path'
import { pathToFileURL } from 'node:url'
import { defineConfig, isConfig, isPipeline, type Pipeline } from '@cohort/pipeline'
import { isPredictor, type Predictor } from '@cohort/predictor'
import type { Registry } from '@cohort/metrics'
import type { TSchema } from '@sinclair/typebox'
import { moduleExports } from '../module-exports.ts'
import { buildPipelineRunners } from '../pipeline/build.ts'
import { PredictorRunner } from '../runners/predictor-runner.ts'
import type { ModelRunner } from '../runners/types.ts'
import type { ExecutionProvider } from '../ort/ort-pool.ts'
import type { RepositoryModelConfig } from './model-config.ts'

const require = createRequire(import.meta.url)

/**
 * Import a repository module afresh: a version's files replaced in place (same path) must not come
 * from Node's module cache. `tag` (the files' signature) makes a new ESM URL; the CommonJS cache
 * entry of a `.ts` file compiled to CommonJS (tsx, in a folder that is not "type": "module") is
 * dropped first. Modules it imports itself stay cached for the life of the process.
 */
export async function importFresh(file: string, tag: string): Promise<Record<string, unknown>> {
  // Node's CommonJS cache is keyed by path: dropping the entry is how a module is unloaded from it.
  Reflect.deleteProperty(require.cache, file)
  const url = `${pathToFileURL(file).href}?cohort-load=${encodeURIComponent(tag)}`
  return moduleExports((await import(url)) as Record<string, unknown>)
}

/** The default export of a `config.ts` (the same object `config.json` holds). */
export async function importConfig(file: string, tag: string): Promise<unknown> {
  const mod = await importFresh(file, tag)
  if (!('default' in mod) || mod['default'] === undefined) {
    throw new RangeError(`${basename(file)} must \`export default\` the configuration (e.g. defineModelConfig({ ... }) of @cohort/predictor)`)
  }
  return mod['default']
}

/** The config fields that apply to a predictor or pipeline version (the rest are ONNX settings). */
const APPLIES: Record<'predictor' | 'pipeline', readonly string[]> = {
  predictor: ['versionPolicy', 'batching'],
  pipeline: ['versionPolicy', 'batching', 'ep', 'instances', 'threads'],
}

/**
 * Refuse config fields that do not apply to this kind of version (docs/repository.md#configjson).
 * @throws RangeError naming the fields.
 */
export function checkConfigFor(kind: 'predictor' | 'pipeline', config: RepositoryModelConfig, configName: string): void {
  const set = Object.entries(config)
    .filter(([k, v]) => v !== undefined && !APPLIES[kind].includes(k))
    .map(([k]) => k)
  if (set.length > 0) {
    throw new RangeError(`${configName} sets ${set.join(', ')}, which a ${kind} does not take (a ${kind} takes ${APPLIES[kind].join(', ')})`)
  }
}

/** A version's runner, with the output schema of a predictor or pipeline (for tensor replies). */
export interface VersionRunner {
  runner: ModelRunner
  outputSchema?: TSchema | undefined
}

/** A predictor version: the module's one predictor, served as `name` in a thread of its own. */
export async function predictorVersion(name: string, file: string, tag: string): Promise<VersionRunner> {
  const mod = await importFresh(file, tag)
  const found = new Set<Predictor>()
  for (const v of Object.values(mod)) {
    for (const x of Array.isArray(v) ? v : [v]) {
      if (isPredictor(x)) {
        found.add(x)
      }
    }
  }
  if (found.size !== 1) {
    const names = [...found].map((p) => p.name)
    throw new Error(
      found.size === 0
        ? 'it exports no predictor (use `export default definePredictor({...})`)'
        : `it exports ${found.size} predictors (${names.join(', ')}); a version serves one`,
    )
  }
  const [p] = [...found] as [Predictor]
  return { runner: new PredictorRunner(p, { modulePath: file, name }), outputSchema: p.output }
}

/** Options of {@link pipelineVersion}. */
export interface PipelineVersionOptions {
  registry?: Registry
  /** ONNX stages: the flags over the config's `ep`, `instances`, `threads`. */
  onnx: { ep?: ExecutionProvider; instances?: number; threads?: number }
}

/** A pipeline version: the module's one pipeline, served as `name`, every stage in this process. */
export async function pipelineVersion(name: string, file: string, tag: string, o: PipelineVersionOptions): Promise<VersionRunner> {
  const mod = await importFresh(file, tag)
  const d = mod['default']
  let p: Pipeline
  if (isPipeline(d)) {
    p = d
  } else if (isConfig(d) && d.models.length === 1) {
    p = d.models[0] as Pipeline
  } else if (isConfig(d)) {
    throw new Error(`its defineConfig holds ${d.models.length} pipelines (${d.models.map((m) => m.name).join(', ')}); a version serves one`)
  } else {
    throw new Error('it must `export default definePipeline({...})` (or a defineConfig of one pipeline)')
  }
  // Served under the folder's name (object spread keeps the pipeline's brand).
  const renamed = p.name === name ? p : ({ ...p, name } as Pipeline)
  const { runners, outputSchemas } = buildPipelineRunners({
    loaded: { config: defineConfig({ models: [renamed] }), file, dir: dirname(file) },
    fused: true,
    ...(o.registry ? { registry: o.registry } : {}),
    onnx: {
      ...(o.onnx.ep !== undefined ? { ep: o.onnx.ep } : {}),
      ...(o.onnx.instances !== undefined ? { instances: o.onnx.instances } : {}),
      intraOpNumThreads: o.onnx.threads,
    },
  })
  return { runner: runners[0] as ModelRunner, outputSchema: outputSchemas[name] }
}
