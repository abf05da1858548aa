import { intFlag, numFlag } from '@cohort/cli/args'
import { CliError } from '@cohort/cli/cli-error'
import { ensureDemoModel, ensureHeavyModel } from '@cohort/cli/demo-model'
import { availableParallelism, loadavg } from 'node:os'
import { offlineCurve, type OfflinePoint } from './offline.ts'
import { table } from './report.ts'
import { defineBenchCommand, type BenchValues } from './skeleton.ts'

/** Help of `cohort bench threads`. */
export const THREADS_HELP = `cohort bench threads [options]
ORT session options offline, side by side: intra-op threads x pool-thread spinning, per batch size:
items/s (wall) and CPU ms per item (every thread of this process). Repeated round-robin, so that
other load on the machine falls on every configuration alike (docs/benchmarks.md#thread-defaults).
  --model demo|heavy     the MLP (default heavy)
  --threads LIST         intra-op thread counts (default 1,<cores>)
  --batches LIST         batch sizes (default 1,32,128)
  --repeats N            rounds over every configuration (default 3)
  --seconds S            timed seconds per point (default 0.4)`

const FEATURES = { demo: 256, heavy: 512 } as const

function list(name: string, v: BenchValues[string], dflt: number[]): number[] {
  if (v === undefined) {
    return dflt
  }
  const out = String(v).split(',').map(Number)
  if (out.some((n) => !Number.isInteger(n) || n < 1)) {
    throw new CliError(`--${name} must be comma-separated integers >= 1, got "${String(v)}"`)
  }
  return out
}

/** `cohort bench threads`: prints median items/s and CPU ms/item with their min-max over the repeats. */
export const benchThreadsCommand = defineBenchCommand({
  help: THREADS_HELP,
  options: {
    model: { type: 'string' },
    threads: { type: 'string' },
    batches: { type: 'string' },
    repeats: { type: 'string' },
    seconds: { type: 'string' },
  },
  run: async (v) => {
    const model = String(v['model'] ?? 'heavy')
    if (model !== 'demo' && model !== 'heavy') {
      throw new CliError(`--model must be demo or heavy, got "${model}"`)
    }
    const threads = list('threads', v['threads'], [...new Set([1, availableParallelism()])])
    const batches = list('batches', v['batches'], [1, 32, 128])
    const repeats = intFlag('repeats', v['repeats']) ?? 3
    const seconds = numFlag('seconds', v['seconds']) ?? 0.4
    const path = model === 'heavy' ? ensureHeavyModel() : ensureDemoModel()
    const configs = threads.flatMap((t) => [false, true].map((spin) => ({ t, spin })))
    const runs = new Map<string, OfflinePoint[][]>()
    const load0 = loadavg()[0] ?? Number.NaN
    for (let r = 0; r < repeats; r++) {
      for (const { t, spin } of configs) {
        const key = `${t}/${spin}`
        const curve = await offlineCurve({ path, threads: t, batches, seconds, features: FEATURES[model], allowSpinning: spin })
        runs.set(key, [...(runs.get(key) ?? []), curve])
      }
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
    const span = (xs: number[], d: number) => `${med(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}-${Math.max(...xs).toFixed(d)})`
    const rows: string[][] = []
    for (const { t, spin } of configs) {
      const curves = runs.get(`${t}/${spin}`) ?? []
      batches.forEach((b, i) => {
        const pts = curves.map((c) => c[i] as OfflinePoint)
        rows.push([
          `${t} thread(s), spin ${spin ? 'on' : 'off'}`,
          String(b),
          span(
            pts.map((p) => p.itemsPerSec),
            0,
          ),
          span(
            pts.map((p) => p.cpuMsPerItem),
            3,
          ),
        ])
      })
    }
    console.log(
      `cohort bench threads: ${model} MLP, ${availableParallelism()} cores, ${repeats} rounds, ${seconds} s per point; load average ${load0.toFixed(2)} -> ${(loadavg()[0] ?? Number.NaN).toFixed(2)}`,
    )
    console.log('median (min-max over the rounds)')
    console.log(table(['session options', 'batch', 'items/s', 'CPU ms/item'], rows))
  },
})
