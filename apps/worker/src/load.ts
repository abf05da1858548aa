import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { isPredictor, type Predictor } from '@cohort/predictor'
import { moduleExports } from './module-exports.ts'

/**
 * Import a predictor module (`.ts` through tsx, or `.js`) and return its predictors: the default
 * export (one predictor or an array) and any named exports made with `definePredictor`.
 */
export async function loadPredictors(path: string): Promise<Predictor[]> {
  const url = pathToFileURL(resolve(path)).href
  let mod: Record<string, unknown>
  try {
    mod = moduleExports((await import(url)) as Record<string, unknown>)
  } catch (e) {
    throw new Error(`cannot load predictor module ${path}: ${e instanceof Error ? e.message : String(e)}`)
  }
  const found = new Set<Predictor>()
  for (const v of Object.values(mod)) {
    for (const x of Array.isArray(v) ? v : [v]) {
      if (isPredictor(x)) {
        found.add(x)
      }
    }
  }
  if (found.size === 0) {
    throw new Error(`${path} exports no predictor (use \`export default definePredictor({...})\`)`)
  }
  return [...found]
}
