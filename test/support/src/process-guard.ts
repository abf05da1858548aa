// No process outlives the suite: every vitest project's globalSetup (test/setup/global-setup.ts)
// creates a run dir, and each test worker (test/setup/worker-setup.ts) puts
// COHORT_TEST_RUN=<run dir> into its environment, so every process a test starts (and everything
// those start: `--processes N` children, `npm start`'s node, `ip netns exec`'s command) inherits it,
// unless a test passes an environment without `process.env`; spawnProcess also records each pid
// (with its start time, against pid reuse) in <run dir>/pids. After the project's last test the
// teardown looks for live processes that carry the mark or are in that list, waits a moment for
// the ones still exiting, then kills the rest and fails the run, naming them.
import { appendFileSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

/** The environment variable that marks the processes of one test run (its value: the run dir). */
export const RUN_MARK = 'COHORT_TEST_RUN'

/** A live process found after the suite. */
export interface Straggler {
  pid: number
  ppid: number
  cmdline: string
}

/** Field 22 of /proc/PID/stat (start time in clock ticks) and field 4 (parent), or undefined. */
function stat(pid: number): { state: string; ppid: number; start: string } | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) is in parentheses and may contain spaces: split after it.
    const rest = s.slice(s.lastIndexOf(')') + 2).split(' ')
    return { state: rest[0]!, ppid: Number(rest[1]), start: rest[19]! }
  } catch {
    return undefined
  }
}

/** Record a process this run started (spawnProcess calls it); a no-op outside a guarded run. */
export function recordChild(pid: number | undefined): void {
  const dir = process.env[RUN_MARK]
  if (!dir || pid === undefined) {
    return
  }
  const st = stat(pid)
  try {
    appendFileSync(join(dir, 'pids'), `${pid} ${st?.start ?? '?'}\n`)
  } catch {
    // The run dir is gone (the run is over): nothing to record into.
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim()
  } catch {
    return '?'
  }
}

/** This process and its ancestors: never counted (the vitest process carries no mark, but be sure). */
function selfAndAncestors(): Set<number> {
  const out = new Set<number>()
  let pid = process.pid
  while (pid > 1 && !out.has(pid)) {
    out.add(pid)
    pid = stat(pid)?.ppid ?? 1
  }
  return out
}

/** Live (not zombie) processes marked with `runDir` or recorded in its pid list. */
export function findStragglers(runDir: string): Straggler[] {
  if (process.platform !== 'linux') {
    return [] // /proc is Linux's; elsewhere the guard is off
  }
  const skip = selfAndAncestors()
  const mark = `\0${RUN_MARK}=${runDir}\0`
  const found = new Map<number, Straggler>()
  const add = (pid: number) => {
    const st = stat(pid)
    if (st && st.state !== 'Z' && !skip.has(pid)) {
      found.set(pid, { pid, ppid: st.ppid, cmdline: cmdline(pid) })
    }
  }
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) {
      continue
    }
    try {
      if (`\0${readFileSync(`/proc/${name}/environ`, 'utf8')}`.includes(mark)) {
        add(Number(name))
      }
    } catch {
      // Exited meanwhile, or not ours to read.
    }
  }
  let recorded = ''
  try {
    recorded = readFileSync(join(runDir, 'pids'), 'utf8')
  } catch {
    // Nothing recorded.
  }
  for (const line of recorded.split('\n')) {
    const [pid, start] = line.split(' ')
    if (pid && stat(Number(pid))?.start === start) {
      add(Number(pid))
    }
  }
  return [...found.values()]
}

/**
 * Wait up to `graceMs` for the run's processes to be gone; SIGKILL the ones left and return them
 * (empty: nothing outlived the suite).
 */
export async function reapStragglers(runDir: string, graceMs = 3000): Promise<Straggler[]> {
  const until = Date.now() + graceMs
  let left = findStragglers(runDir)
  while (left.length > 0 && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 100))
    left = findStragglers(runDir)
  }
  for (const p of left) {
    try {
      process.kill(p.pid, 'SIGKILL')
    } catch {
      // Gone meanwhile.
    }
  }
  return left
}
