import cluster, { type Worker } from 'node:cluster'
import { knobHelp, knobOptions, knobValues, type KnobTable } from './knobs.ts'
import { CliError } from './cli-error.ts'

/**
 * `cohort gateway --processes N` (docs/reliability.md#gateway-processes): N gateway processes on one
 * port through `node:cluster`. The primary forks N children that each run the whole gateway (their
 * own NATS connection, gateway id, packer and metrics registry) and share the listening sockets
 * (HTTP and gRPC); the primary hands out connections round robin and serves nothing itself. On
 * SIGTERM or SIGINT the primary asks every child to stop over IPC; each child then runs its own
 * drain (the same steps as a single gateway), idempotently (a child that also got the signal itself,
 * as on Ctrl-C, drains once). A child that exits before it listened stops them all (a bad flag, a
 * port in use); one that exits later is restarted, at most {@link MAX_RESTARTS} times a minute.
 * @module
 */

/** Default number of gateway processes: one, the plain process without node:cluster. */
export const DEFAULT_PROCESSES = 1
/** Most restarts of crashed children per minute before the primary gives up and exits 1. */
export const MAX_RESTARTS = 5
/** IPC message from the primary asking a child to drain and exit. */
const STOP = 'cohort:stop'
/** IPC message from a child once it listens. */
const LISTENING = 'cohort:listening'

export const PROCESSES_KNOBS = Object.freeze({
  processes: {
    kind: 'int',
    arg: 'N',
    default: DEFAULT_PROCESSES,
    help: [
      'run N gateway processes on the same port (node:cluster; default {default}):',
      'each has its own NATS connection and metrics, so a /metrics scrape sees the',
      'process that accepted its connection (docs/reliability.md#gateway-processes)',
    ],
  },
} as const satisfies KnobTable)

export const PROCESSES_OPTIONS = knobOptions(PROCESSES_KNOBS)
export const PROCESSES_HELP = knobHelp(PROCESSES_KNOBS)

/** `--processes` of `cohort gateway` (>= 1, default {@link DEFAULT_PROCESSES}). */
export function processesFlag(v: Record<string, unknown>): number {
  return knobValues(PROCESSES_KNOBS, v)['processes']
}

/** Whether this process is a child forked by {@link runPrimary}. */
export function isClusterChild(): boolean {
  return cluster.isWorker
}

/** In a child: tell the primary that this child listens now (no-op outside a cluster). */
export function notifyListening(): void {
  if (cluster.isWorker) {
    process.send?.(LISTENING)
  }
}

/** In a child: run `stop` (idempotent) when the primary asks, then exit with its code. */
export function onPrimaryStop(stop: (reason: string) => Promise<number>): void {
  if (!cluster.isWorker) {
    return
  }
  process.on('message', (m) => {
    if (m === STOP) {
      void stop('stop requested by the gateway primary').then((code) => process.exit(code))
    }
  })
}

/**
 * The primary of `--processes N`: forks N children running the same command line and waits for all of
 * them to stop. Resolves with the exit code: 0 after a signal-driven stop in which every child exited
 * 0, else 1.
 */
export function runPrimary(n: number, log: (line: string) => void = (l) => console.error(l)): Promise<number> {
  if (!cluster.isPrimary) {
    throw new CliError('runPrimary: not the cluster primary')
  }
  return new Promise<number>((resolve) => {
    const live = new Set<Worker>()
    const listening = new Set<Worker>()
    const restarts: number[] = []
    let stopping = false
    let failed = false
    const finish = () => {
      if (live.size === 0) {
        resolve(failed ? 1 : 0)
      }
    }
    const stopAll = (reason: string) => {
      if (stopping) {
        return
      }
      stopping = true
      log(`cohort: ${reason}, stopping ${live.size} gateway process${live.size === 1 ? '' : 'es'}`)
      for (const w of live) {
        if (w.isConnected()) {
          w.send(STOP)
        } else {
          w.process.kill('SIGTERM')
        }
      }
      finish()
    }
    const fork = () => {
      const w = cluster.fork()
      live.add(w)
      w.on('message', (m) => {
        if (m === LISTENING) {
          listening.add(w)
          if (listening.size === n && !stopping) {
            log(`cohort: ${n} gateway processes listening (pids ${[...live].map((x) => x.process.pid).join(', ')})`)
          }
        }
      })
      // Node's types say a string signal; it is null when the child exited by itself (and code null when killed).
      w.on('exit', (code: number | null, signal: string | null) => {
        live.delete(w)
        const ok = code === 0 && signal === null
        if (stopping) {
          failed ||= !ok
          finish()
          return
        }
        if (!listening.has(w)) {
          failed = true
          log(`cohort: a gateway process exited (${signal ?? `code ${code}`}) before it listened; stopping`)
          stopAll('startup failed')
          return
        }
        listening.delete(w)
        if (restartedTooOften(restarts, Date.now())) {
          failed = true
          log(`cohort: gateway processes exited ${restarts.length} times within a minute; stopping`)
          stopAll('too many restarts')
          return
        }
        log(`cohort: gateway process ${w.process.pid} exited (${signal ?? `code ${code}`}); starting another`)
        fork()
      })
    }
    onSignals(live, log, stopAll, resolve)
    for (let i = 0; i < n; i++) {
      fork()
    }
  })
}

/** Record a child's restart at `now`: true when more than MAX_RESTARTS fell within the last minute. */
function restartedTooOften(restarts: number[], now: number): boolean {
  restarts.push(now)
  while (restarts[0] !== undefined && restarts[0] < now - 60_000) {
    restarts.shift()
  }
  return restarts.length > MAX_RESTARTS
}

/** The primary's SIGTERM and SIGINT: the first stops the children, a second kills them and resolves 1. */
function onSignals(live: ReadonlySet<Worker>, log: (line: string) => void, stopAll: (reason: string) => void, resolve: (code: number) => void): void {
  let signals = 0
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.on(sig, () => {
      if (++signals > 1) {
        log(`cohort: ${sig} again, stopping the gateway processes now`)
        for (const w of live) {
          w.process.kill('SIGKILL')
        }
        resolve(1)
        return
      }
      stopAll(sig)
    })
  }
}
