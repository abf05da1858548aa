import { existsSync } from 'node:fs'
import { basename, extname } from 'node:path'
import { isValidModelName } from '@cohort/protocol'
import { ensureDemoModel, ensureHeavyModel } from './demo-model.ts'
import { CliError } from './cli-error.ts'

/** A model to serve: a name and an ONNX file. */
export interface ModelSpec {
  name: string
  path: string
}

/** Parse `--model` values: `demo`, `heavy`, `NAME=PATH.onnx` or `PATH.onnx` (named after the file). */
export function parseModelSpec(spec: string): ModelSpec {
  if (spec === 'demo') {
    return { name: 'demo', path: ensureDemoModel() }
  }
  if (spec === 'heavy') {
    return { name: 'heavy', path: ensureHeavyModel() }
  }
  const eq = spec.indexOf('=')
  const name = eq > 0 ? spec.slice(0, eq) : basename(spec, extname(spec))
  const path = eq > 0 ? spec.slice(eq + 1) : spec
  if (!isValidModelName(name)) {
    throw new CliError(`invalid model name "${name}" in --model ${spec} (use letters, digits, '_', '-', '.')`)
  }
  if (!existsSync(path)) {
    throw new CliError(`model file not found: ${path} (from --model ${spec})`)
  }
  return { name, path }
}
