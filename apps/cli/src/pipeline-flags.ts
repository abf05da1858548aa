import type { BatchingConfig } from '@cohort/batching'
import type { Registry } from '@cohort/metrics'
import { DEFAULT_REMOTE_CONCURRENCY, buildPipelineRunners, loadConfig, type ExecutionProvider, type ModelRunner } from '@cohort/worker'
import type { Transport } from '@cohort/transport'
import type { TSchema } from '@sinclair/typebox'
import { knobGiven, knobHelp, knobOptions, type KnobTable } from './knobs.ts'
import { CliError } from './cli-error.ts'
import type { ModelFlags } from './runners.ts'
import { prefixOption } from './prefix-flags.ts'

/** Pipeline flags of `serve` and `worker` (with a config directory as the positional argument). */
export const STAGE_KNOB = Object.freeze({
  stage: {
    kind: 'list',
    arg: 'NAME',
    help: ["serve only this stage of DIR's pipelines on its own subject, for the", "pipelines' --remote callers (repeatable; NAME or PIPELINE.NAME)"],
  },
} as const satisfies KnobTable)

/** The pipeline knobs of both serve and worker. */
export const PIPELINE_KNOBS = Object.freeze({
  remote: { kind: 'list', arg: 'NAME', help: ['call this stage on its stage workers (cohort worker DIR --stage NAME) instead', 'of in process (repeatable; needs NATS)'] },
  fused: { kind: 'bool', help: ["run every stage in process, whatever the config's placement says"] },
  'remote-concurrency': { kind: 'int', arg: 'N', default: DEFAULT_REMOTE_CONCURRENCY, help: ['batches in flight per remote stage'] },
} as const satisfies KnobTable)

export const PIPELINE_OPTIONS = { ...knobOptions(STAGE_KNOB), ...knobOptions(PIPELINE_KNOBS) }

/** `serve`'s pipeline flags: whole pipelines only (stage workers are `cohort worker DIR --stage`). */
export const SERVE_PIPELINE_OPTIONS = knobOptions(PIPELINE_KNOBS)

const PIPELINE_COMMON_HELP = knobHelp(PIPELINE_KNOBS)

/** Help text of {@link SERVE_PIPELINE_OPTIONS}. */
export const SERVE_PIPELINE_HELP = `  DIR                    serve the pipelines of DIR/cohort.config.ts (see docs/pipelines.md)
${PIPELINE_COMMON_HELP}`

/** Help text of {@link PIPELINE_OPTIONS} (`worker`). */
export const PIPELINE_HELP = `  DIR                    serve the pipelines of DIR/cohort.config.ts (see docs/pipelines.md)
${knobHelp(STAGE_KNOB)}
${PIPELINE_COMMON_HELP}`

type Values = Record<string, string | boolean | string[] | undefined>

/** Runners for the config directory given as a positional argument (none without one). */
export async function pipelineRunners(
  positionals: string[],
  v: Values,
  ctx: { transport: Transport; registry: Registry; flags: ModelFlags; batching: Partial<BatchingConfig>; allowStage: boolean },
): Promise<{ runners: ModelRunner[]; outputSchemas: Record<string, TSchema | undefined> }> {
  const stages = (v['stage'] as string[] | undefined) ?? []
  const remote = (v['remote'] as string[] | undefined) ?? []
  const [dir, ...extra] = positionals
  if (extra.length > 0) {
    throw new CliError(`give one config directory, got ${positionals.join(' ')}`)
  }
  if (dir === undefined) {
    if (stages.length > 0 || remote.length > 0 || v['fused']) {
      throw new CliError('--stage, --remote and --fused need a config directory (cohort worker DIR --stage NAME)')
    }
    return { runners: [], outputSchemas: {} }
  }
  if (stages.length > 0 && !ctx.allowStage) {
    throw new CliError('--stage is for `cohort worker`; `cohort serve` serves whole pipelines')
  }
  try {
    const loaded = await loadConfig(dir)
    const rc = knobGiven(PIPELINE_KNOBS, v, {})['remote-concurrency']
    return buildPipelineRunners({
      loaded,
      transport: ctx.transport,
      stages,
      remote,
      fused: v['fused'] === true,
      registry: ctx.registry,
      batching: {
        ...ctx.batching,
        ...(ctx.flags.maxBatchSize !== undefined ? { maxBatchSize: ctx.flags.maxBatchSize } : {}),
        ...(ctx.flags.maxDelayMs !== undefined ? { maxDelayMs: ctx.flags.maxDelayMs } : {}),
      },
      onnx: {
        ep: ctx.flags.ep as ExecutionProvider,
        instances: ctx.flags.instances,
        intraOpNumThreads: ctx.flags.threads,
      },
      ...(rc !== undefined ? { remoteConcurrency: rc } : {}),
      ...prefixOption(v),
    })
  } catch (e) {
    throw e instanceof CliError ? e : new CliError(e instanceof Error ? e.message : String(e))
  }
}
