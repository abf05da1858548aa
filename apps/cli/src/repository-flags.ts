import { existsSync, statSync } from 'node:fs'
import type { PaddingOptions, WorkerRepositoryOptions } from '@cohort/worker'
import { knobGiven, knobHelp, knobOptions, type KnobTable } from './knobs.ts'
import { CliError } from './cli-error.ts'
import { shown } from './args.ts'
import { linkOptions } from './reliability-flags.ts'

/** `--repository-poll-ms` when not given: no scan (load and unload by the repository API). */
export const REPOSITORY_POLL_OFF = 0

/** `--model-repository DIR` and `--repository-poll-ms MS` (serve and worker; docs/repository.md). */
export const REPOSITORY_KNOBS = Object.freeze({
  'model-repository': {
    kind: 'string',
    arg: 'DIR',
    help: [
      'serve the models of a Triton-style folder: DIR/<model>/<version>/model.onnx',
      "(or a predictor's model.ts, a pipeline's pipeline.ts), with",
      'DIR/<model>/config.json or config.ts (batching, instances, threads, ep,',
      'padding, warmup, versionPolicy); see docs/repository.md. --ep, --instances,',
      '--threads, --ort-processes, --pad and the batching flags apply over it',
    ],
  },
  'repository-poll-ms': {
    kind: 'int',
    arg: 'MS',
    min: 0,
    default: REPOSITORY_POLL_OFF,
    help: ['scan DIR this often for new, changed and removed versions (default {default}: off;', 'load and unload then come from POST /v2/repository/models/{m}/load|unload)'],
  },
} as const satisfies KnobTable)

export const REPOSITORY_OPTIONS = knobOptions(REPOSITORY_KNOBS)
export const REPOSITORY_HELP = knobHelp(REPOSITORY_KNOBS)

/**
 * The worker's repository options from the flags, or undefined without `--model-repository`.
 * `explicit` says which of the shared model flags the command line gave (a default is no flag:
 * config.json wins over it).
 */
export function repositoryOptions(
  v: Record<string, unknown>,
  explicit: { ep?: string | undefined; instances?: number | undefined; threads?: number | undefined; processes?: boolean | undefined; padding?: PaddingOptions | undefined },
): WorkerRepositoryOptions | undefined {
  const dir = v['model-repository']
  const poll = knobGiven(REPOSITORY_KNOBS, v, {})['repository-poll-ms']
  if (dir === undefined) {
    if (poll !== undefined) {
      throw new CliError('--repository-poll-ms needs --model-repository DIR')
    }
    if (linkOptions(v).allowLinksOutside) {
      throw new CliError('--allow-links-outside needs --model-repository DIR')
    }
    return undefined
  }
  if (typeof dir !== 'string' || !existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new CliError(`--model-repository: ${shown(dir)} is not a folder`)
  }
  const flags: NonNullable<WorkerRepositoryOptions['flags']> = {}
  if (explicit.ep !== undefined) {
    if (explicit.ep !== 'cpu' && explicit.ep !== 'cuda' && explicit.ep !== 'webgpu') {
      throw new CliError(`--ep must be one of cpu, webgpu, cuda, got "${explicit.ep}"`)
    }
    flags.ep = explicit.ep
  }
  if (explicit.instances !== undefined) {
    flags.instances = explicit.instances
  }
  if (explicit.threads !== undefined) {
    flags.threads = explicit.threads
  }
  if (explicit.processes) {
    flags.processes = true
  }
  if (explicit.padding !== undefined) {
    flags.padding = explicit.padding
  }
  return { dir, ...(poll !== undefined ? { pollMs: poll } : {}), flags, ...linkOptions(v) }
}

/** True when `args` gives `--name` (with a value or `=value`): a flag with a default that was really given. */
export function given(args: readonly string[], name: string): boolean {
  return args.some((a) => a === `--${name}` || a.startsWith(`--${name}=`))
}
