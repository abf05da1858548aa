import { Worker } from 'node:worker_threads'
import { CohortError, isErrorCode, type WireError } from '@cohort/protocol'
import type { Predictor } from '@cohort/predictor'

/** One item's outcome as it leaves a predictor: its value, or the error that failed it alone. */
export type ExecItem = { v: unknown } | { e: WireError }

/**
 * Where a predictor's setup() and predict() run: in the worker's main thread ({@link InlineExec},
 * for predictors passed as objects) or in a worker thread of its own ({@link ThreadExec}, for
 * predictor modules loaded by path). One instance is one life: after {@link kill} a new one is made.
 */
export interface PredictorExec {
  /** Run setup(); rejects when it throws. */
  start(): Promise<void>
  /** Run one batch. Rejects with CohortError when the batch throws or the exec dies under it. */
  run(inputs: unknown[]): Promise<ExecItem[]>
  /** End now, even in the middle of a batch (a thread is terminated). Idempotent. */
  kill(): Promise<void>
  /** teardown(), then end. Idempotent. */
  close(): Promise<void>
  /** Called once when the exec ends by itself (a thread that exited or crashed). */
  onDied: ((why: string) => void) | undefined
}

function itemOf(v: unknown): ExecItem {
  if (v instanceof Error) {
    const code = (v as Error & { code?: unknown }).code
    return { e: { code: isErrorCode(code) ? code : 'PREDICTOR_FAILED', message: v.message } }
  }
  return { v }
}

/** Runs the predictor object in the calling thread (embedded use, tests, pipelines). */
export class InlineExec implements PredictorExec {
  readonly #p: Predictor
  readonly #abort = new AbortController()
  onDied: ((why: string) => void) | undefined

  readonly #servedAs: string

  constructor(p: Predictor, servedAs: string = p.name) {
    this.#p = p
    this.#servedAs = servedAs
  }

  start(): Promise<void> {
    return this.#p.setup({ name: this.#servedAs, signal: this.#abort.signal })
  }

  async run(inputs: unknown[]): Promise<ExecItem[]> {
    if (this.#abort.signal.aborted) {
      throw new CohortError('NOT_READY', `predictor ${this.#p.name} was stopped`)
    }
    const out = await this.#p.predictBatch(inputs, { batchSize: inputs.length, signal: this.#abort.signal })
    return out.map(itemOf)
  }

  /** A promise that never settles cannot be stopped in this thread: abort its signal and tear down. */
  async kill(): Promise<void> {
    await this.close()
  }

  #closed: Promise<void> | undefined

  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#abort.abort()
      await this.#p.teardown()
    })()
    return this.#closed
  }
}

const HOST_URL = new URL('./predictor-host.mjs', import.meta.url)

/**
 * Runs the predictor exported as `name` by the module at `path` in a worker thread of its own,
 * served as `servedAs` (its setup() gets that name; a repository serves a module under its folder's name).
 */
export class ThreadExec implements PredictorExec {
  readonly #path: string
  readonly #name: string
  #w: Worker | undefined
  #seq = 0
  readonly #pending = new Map<number, { resolve: (r: ExecItem[]) => void; reject: (e: Error) => void }>()
  #ready: { resolve: () => void; reject: (e: Error) => void } | undefined
  #closed: { resolve: () => void } | undefined
  #ended = false
  #ending: Promise<void> | undefined
  onDied: ((why: string) => void) | undefined

  readonly #servedAs: string

  constructor(path: string, name: string, servedAs: string = name) {
    this.#servedAs = servedAs
    this.#path = path
    this.#name = name
  }

  start(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#ready = { resolve, reject }
      const w = new Worker(HOST_URL, { workerData: { path: this.#path, name: this.#name, servedAs: this.#servedAs } })
      this.#w = w
      w.on('message', (m: Record<string, unknown>) => this.#onMessage(m))
      w.on('error', (e) => this.#end(`predictor thread failed: ${e.message}`))
      w.on('exit', (code) => this.#end(`predictor thread exited with code ${code}`))
    })
  }

  run(inputs: unknown[]): Promise<ExecItem[]> {
    const w = this.#w
    if (!w || this.#ended) {
      return Promise.reject(new CohortError('NOT_READY', `predictor ${this.#servedAs}: its thread is not running`))
    }
    const id = ++this.#seq
    return new Promise<ExecItem[]>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject })
      try {
        w.postMessage({ type: 'run', id, inputs, batchSize: inputs.length })
      } catch (e) {
        this.#pending.delete(id)
        reject(new CohortError('INVALID_INPUT', `inputs cannot reach the predictor thread (they must be structured-cloneable): ${e instanceof Error ? e.message : String(e)}`))
      }
    })
  }

  kill(): Promise<void> {
    this.#ending ??= (async () => {
      const w = this.#w
      this.#end('killed', true)
      await w?.terminate()
    })()
    return this.#ending
  }

  close(): Promise<void> {
    if (!this.#w || this.#ended) {
      return this.kill()
    }
    const w = this.#w
    const closed = new Promise<void>((resolve) => {
      this.#closed = { resolve }
    })
    w.postMessage({ type: 'close' })
    // teardown() gets a bounded time; the thread goes either way.
    const t = setTimeout(() => this.#closed?.resolve(), 5_000)
    return closed.finally(() => {
      clearTimeout(t)
      return this.kill()
    })
  }

  #onMessage(m: Record<string, unknown>): void {
    switch (m['type']) {
      case 'ready':
        this.#ready?.resolve()
        this.#ready = undefined
        return
      case 'setup-error':
        this.#ready?.reject(new Error(`predictor ${this.#servedAs}: setup failed: ${String(m['message'])}`))
        this.#ready = undefined
        void this.kill()
        return
      case 'closed':
        this.#closed?.resolve()
        return
    }
    const id = m['id'] as number
    const p = this.#pending.get(id)
    this.#pending.delete(id)
    if (m['type'] === 'result') {
      p?.resolve(m['items'] as ExecItem[])
    } else {
      const code = m['code']
      p?.reject(new CohortError(isErrorCode(code) ? code : 'PREDICTOR_FAILED', String(m['message'])))
    }
  }

  /** The thread is gone (or going): fail what waits on it; tell the owner unless it asked for it. */
  #end(why: string, asked = false): void {
    if (this.#ended) {
      return
    }
    this.#ended = true
    const err = new CohortError('INTERNAL', `predictor ${this.#servedAs}: ${why}`)
    this.#ready?.reject(err)
    this.#ready = undefined
    for (const p of this.#pending.values()) {
      p.reject(err)
    }
    this.#pending.clear()
    this.#closed?.resolve()
    if (!asked) {
      this.onDied?.(why)
    }
  }
}
