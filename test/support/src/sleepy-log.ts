import { existsSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** One line of the sleepy predictor's SLEEPY_LOG: a batch started or ended, with its items' x. */
export interface SleepyEvent {
  event: 'start' | 'end'
  xs: number[]
  pid: number
}

/** A fresh SLEEPY_LOG path (the file itself is created by the first batch). */
export function sleepyLogPath(): string {
  return join(mkdtempSync(join(tmpdir(), 'cohort-sleepy-')), 'batches.jsonl')
}

/** The events of a SLEEPY_LOG so far. */
export function readSleepyLog(path: string): SleepyEvent[] {
  if (!existsSync(path)) {
    return []
  }
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as SleepyEvent)
}

/** How many batches ran (started) each x, from a SLEEPY_LOG. */
export function sleepyRuns(path: string): Map<number, number> {
  const runs = new Map<number, number>()
  for (const e of readSleepyLog(path)) {
    if (e.event === 'start') {
      for (const x of e.xs) runs.set(x, (runs.get(x) ?? 0) + 1)
    }
  }
  return runs
}

/**
 * Wait until a batch holding `x` has started and has not ended (it is running now): the real signal
 * that a blocker occupies the worker, instead of a sleep.
 */
export async function waitRunning(path: string, x: number, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs
  for (;;) {
    let open = 0
    for (const e of readSleepyLog(path)) {
      if (e.xs.includes(x)) open += e.event === 'start' ? 1 : -1
    }
    if (open > 0) {
      return
    }
    if (Date.now() > end) {
      throw new Error(`no batch with x=${x} running within ${timeoutMs} ms (${path})`)
    }
    await new Promise((r) => setTimeout(r, 20))
  }
}
