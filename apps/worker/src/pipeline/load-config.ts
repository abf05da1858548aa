import { existsSync, statSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { isConfig, type CohortConfig } from '@cohort/pipeline'
import { moduleExports } from '../module-exports.ts'

/** Config file names looked up in a directory, in order. */
export const CONFIG_FILES = ['cohort.config.ts', 'cohort.config.js', 'cohort.config.mjs'] as const

/** A loaded `cohort.config.ts` and the folder relative model paths resolve against. */
export interface LoadedConfig {
  config: CohortConfig
  file: string
  dir: string
}

/** The config file of a directory (or the file itself). */
export function findConfigFile(path: string): string | undefined {
  const abs = resolve(path)
  if (!existsSync(abs)) {
    return undefined
  }
  if (statSync(abs).isFile()) {
    return abs
  }
  return CONFIG_FILES.map((f) => resolve(abs, f)).find((f) => existsSync(f))
}

/** Import `<dir>/cohort.config.ts` (through tsx) and check its default export is `defineConfig(...)`. */
export async function loadConfig(path: string): Promise<LoadedConfig> {
  const file = findConfigFile(path)
  if (!file) {
    throw new Error(`${path}: no ${CONFIG_FILES.join(' / ')} found`)
  }
  let mod: Record<string, unknown>
  try {
    mod = moduleExports((await import(pathToFileURL(file).href)) as Record<string, unknown>)
  } catch (e) {
    throw new Error(`cannot load ${file}: ${e instanceof Error ? e.message : String(e)}`)
  }
  const config = mod['default']
  if (!isConfig(config)) {
    throw new Error(`${file} must \`export default defineConfig({ models: [...] })\``)
  }
  return { config, file, dir: dirname(file) }
}
