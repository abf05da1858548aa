import { BENCH_BIN } from './bin-path.ts'
import { fork, type ChildProcess } from 'node:child_process'
import { runOpenLoop, type LoadRecords, type LoadStep } from './poisson.ts'

type ToWorker = { id: number; step: LoadStep }
type FromWorker = { id: number; records?: LoadRecords; error?: string }

/**
 * Body of `cohort bench load-worker` (started by {@link LoadGenerator} with an IPC channel): run
 * each step the parent sends, one at a time, and send its records back. Exits when the parent
 * disconnects (including when the parent dies), so it never outlives the bench.
 */
export function loadWorkerMain(): Promise<void> {
  if (!process.send) {
    throw new Error('cohort bench load-worker is started by `cohort bench policies` (it needs an IPC channel)')
  }
  return new Promise((resolve) => {
    let chain = Promise.resolve()
    process.on('message', (m: ToWorker) => {
      chain = chain.then(async () => {
        let reply: FromWorker
        try {
          reply = { id: m.id, records: await runOpenLoop(m.step) }
        } catch (e) {
          reply = { id: m.id, error: e instanceof Error ? e.message : String(e) }
        }
        process.send?.(reply)
      })
    })
    process.once('disconnect', () => {
      resolve()
      process.exit(0)
    })
  })
}

/**
 * The parent's handle on the open-loop load generator: a separate `node cohort.js bench
 * load-worker` process, so that generating load does not share the server's (or the bench's)
 * event loop. Steps run one at a time.
 */
export class LoadGenerator {
  readonly #proc: ChildProcess
  readonly #waiting = new Map<number, { resolve: (r: LoadRecords) => void; reject: (e: Error) => void }>()
  #next = 1
  #exited = false

  private constructor(proc: ChildProcess) {
    this.#proc = proc
    proc.on('message', (m: FromWorker) => {
      const w = this.#waiting.get(m.id)
      this.#waiting.delete(m.id)
      if (m.records) {
        w?.resolve(m.records)
      } else {
        w?.reject(new Error(`load generator: ${m.error ?? 'no records'}`))
      }
    })
    proc.once('exit', (code, signal) => {
      this.#exited = true
      for (const w of this.#waiting.values()) {
        w.reject(new Error(`load generator exited (${signal ?? code})`))
      }
      this.#waiting.clear()
    })
  }

  /** Fork the load-generator process. */
  static start(): LoadGenerator {
    const proc = fork(BENCH_BIN, ['load-worker'], { execArgv: [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    return new LoadGenerator(proc)
  }

  /** Process id of the generator process (for its CPU time). */
  get pid(): number | undefined {
    return this.#proc.pid
  }

  /** Whether the generator process is still there. */
  get running(): boolean {
    return !this.#exited
  }

  /** Run one step in the generator process; resolves with its per-request records. */
  run(step: LoadStep): Promise<LoadRecords> {
    if (this.#exited) {
      return Promise.reject(new Error('load generator is not running'))
    }
    const id = this.#next++
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject })
      this.#proc.send({ id, step } satisfies ToWorker)
    })
  }

  /** Stop the generator process (disconnect, then SIGKILL if it lingers). Idempotent. */
  async stop(): Promise<void> {
    if (this.#exited) {
      return
    }
    const exited = new Promise<void>((r) => this.#proc.once('exit', () => r()))
    if (this.#proc.connected) {
      this.#proc.disconnect()
    }
    const t = setTimeout(() => this.#proc.kill('SIGKILL'), 2000)
    await exited
    clearTimeout(t)
  }
}
