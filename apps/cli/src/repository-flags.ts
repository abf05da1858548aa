import { existsSync, statSync } from 'node:fs'
import type { PaddingOptions, WorkerRepositoryOptions } from '@cohort/worker'
import { intFlag } from './args.ts'
import { CliError } from './cli-error.ts'
import { linkOptions } from './reliability-flags.ts'

/** `--model-repository DIR` and `--repository-poll-ms MS` (serve and worker; docs/repository.md). */
export const REPOSITORY_OPTIONS = {
  'model-repository': { type: 'string' },
  'repository-poll-ms': { type: 'string' },
} as const

export const REPOSITORY_HELP = `  --model-repository DIR serve the models of a Triton-style folder: DIR/<model>/<version>/model.onnx
                         (or a predictor's model.ts, a pipeline's pipeline.ts), with
                         DIR/<model>/config.json or config.ts (batching, instances, threads, ep,
                         padding, warmup, versionPolicy); see docs/repository.md. --ep, --instances,
                         --threads, --ort-processes, --pad and the batching flags apply over it
  --repository-poll-ms MS  scan DIR this often for new, changed and removed versions (default 0: off;
                         load and unload then come from POST /v2/repository/models/{m}/load|unload)`

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
  const poll = intFlag('repository-poll-ms', v['repository-poll-ms'], 0)
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
    throw new CliError(`--model-repository: ${String(dir)} is not a folder`)
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
