import { isAbsolute, resolve } from 'node:path'
import type { BatchingConfig } from '@cohort/batching'
import type { Registry } from '@cohort/metrics'
import { inProcessRunner, leafStages, pipelineMetrics, type LeafStage, type Pipeline, type StageRunner } from '@cohort/pipeline'
import { subjects as makeSubjects, DEFAULT_SUBJECT_PREFIX } from '@cohort/protocol'
import type { Transport } from '@cohort/transport'
import type { TSchema } from '@sinclair/typebox'
import type { ExecutionProvider } from '../ort/ort-pool.ts'
import type { ModelRunner } from '../runners/types.ts'
import type { LoadedConfig } from './load-config.ts'
import { OnnxStageRunner } from './onnx-stage-runner.ts'
import { PipelineRunner } from './pipeline-runner.ts'
import { RemoteStageRunner } from './remote-stage-runner.ts'
import { StageServerRunner } from './stage-server-runner.ts'

/** Options of {@link buildPipelineRunners}. */
export interface PipelineRunnersOptions {
  loaded: LoadedConfig
  /** The bus remote stages are called over (and served on). */
  transport?: Transport | undefined
  /** @default 'cohort' */
  subjectPrefix?: string
  /**
   * Serve only these stages, each on its own subject (`cohort worker <dir> --stage <name>`);
   * `stage` or `pipeline.stage`. @default serve the pipeline models
   */
  stages?: string[]
  /** Stages to call remotely, over the config's `placement` (`stage` or `pipeline.stage`). */
  remote?: string[]
  /** Run every stage in process, whatever the config says. @default false */
  fused?: boolean
  /** ONNX stages: execution provider, sessions (a stage's own `instances` wins), intra-op threads. */
  onnx?: { ep?: ExecutionProvider; instances?: number; intraOpNumThreads?: number | undefined }
  /** Per-stage metrics go here. */
  registry?: Registry
  /** In-flight batches per remote stage. @default 4 */
  remoteConcurrency?: number
  /** Batching overrides for every stage (policy, maxQueue). */
  batching?: Partial<BatchingConfig>
}

const matches = (names: readonly string[], p: Pipeline, s: LeafStage): boolean => names.includes(s.name) || names.includes(`${p.name}.${s.name}`)

/** The in-process runner of a leaf stage (ONNX through the worker's ORT pool). */
export function localStageRunner(p: Pipeline, s: LeafStage, o: PipelineRunnersOptions): StageRunner {
  if (s.kind === 'ts') {
    return inProcessRunner(s)
  }
  const path = isAbsolute(s.model) ? s.model : resolve(o.loaded.dir, s.model)
  return new OnnxStageRunner(s.name, {
    name: `${p.name}.${s.name}`,
    path,
    ep: o.onnx?.ep ?? 'cpu',
    // The stage's own instance count wins over the host's default (--instances).
    instances: s.instances ?? o.onnx?.instances ?? 1,
    ...(o.onnx?.intraOpNumThreads !== undefined ? { intraOpNumThreads: o.onnx.intraOpNumThreads } : {}),
    maxBatchSize: s.batch.maxBatchSize,
    maxDelayMs: s.batch.maxDelayMs,
  })
}

/**
 * Runners for a loaded config: the pipeline models (stages fused, or chained to remote stages),
 * or, with `stages`, only those stages on their own subjects.
 * @throws Error for an unknown stage name, or a remote stage without a transport.
 */
export function buildPipelineRunners(o: PipelineRunnersOptions): { runners: ModelRunner[]; outputSchemas: Record<string, TSchema | undefined> } {
  const models = o.loaded.config.models
  const known = models.flatMap((p) => leafStages(p).flatMap((s) => [s.name, `${p.name}.${s.name}`]))
  for (const n of [...(o.stages ?? []), ...(o.remote ?? [])]) {
    if (!known.includes(n)) {
      throw new Error(`${o.loaded.file} has no stage "${n}" (stages: ${[...new Set(known)].join(', ')})`)
    }
  }
  const runners: ModelRunner[] = []
  const outputSchemas: Record<string, TSchema | undefined> = {}
  if (o.stages && o.stages.length > 0) {
    for (const p of models) {
      for (const s of leafStages(p)) {
        if (matches(o.stages, p, s)) {
          const batch = {
            ...(o.batching?.maxBatchSize !== undefined ? { maxBatchSize: o.batching.maxBatchSize } : {}),
            ...(o.batching?.maxDelayMs !== undefined ? { maxDelayMs: o.batching.maxDelayMs } : {}),
          }
          runners.push(new StageServerRunner(p.name, s, localStageRunner(p, s, o), batch))
        }
      }
    }
    return { runners, outputSchemas }
  }
  const subjects = makeSubjects(o.subjectPrefix ?? DEFAULT_SUBJECT_PREFIX)
  const metrics = o.registry ? pipelineMetrics(o.registry) : undefined
  for (const p of models) {
    const remote = (s: LeafStage) => !o.fused && (matches(o.remote ?? [], p, s) || s.placement === 'remote')
    runners.push(
      new PipelineRunner({
        pipeline: p,
        ...(metrics ? { metrics } : {}),
        ...(o.batching ? { batching: o.batching } : {}),
        runnerFor: (s) => {
          if (!remote(s)) {
            return localStageRunner(p, s, o)
          }
          if (!o.transport) {
            throw new Error(`stage ${s.name} of ${p.name} is remote but there is no transport`)
          }
          return new RemoteStageRunner({
            transport: o.transport,
            subjects,
            pipeline: p.name,
            stage: s.name,
            ...(o.remoteConcurrency ? { concurrency: o.remoteConcurrency } : {}),
          })
        },
      }),
    )
    outputSchemas[p.name] = p.output
  }
  return { runners, outputSchemas }
}
