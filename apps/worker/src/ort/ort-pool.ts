import { fork, type ChildProcess } from 'node:child_process'
import { availableParallelism } from 'node:os'
import { Worker } from 'node:worker_threads'
import { CohortError } from '@cohort/protocol'

/** Execution providers Cohort can ask onnxruntime-node for. */
export type ExecutionProvider = 'cpu' | 'webgpu' | 'cuda'

/** A feed or fetch as it crosses to an ORT host. */
export interface HostTensor {
  type: string
  dims: number[]
  data: ArrayBufferView | string[]
}

/** Metadata of one input or output as ORT reports it (-1 for symbolic dims). */
export interface HostValueMeta {
  name: string
  isTensor: boolean
  type: string
  shape: number[]
  /** Symbolic dim names (null for fixed dims). */
  dimNames?: (string | null)[]
}

/** Options of {@link OrtPool}. */
export interface OrtPoolOptions {
  path: string
  /** @default 'cpu' */
  ep?: ExecutionProvider
  /** Sessions, each in its own thread (CPU) or process (GPU EPs, which do not share a process). @default 1 */
  instances?: number
  /** ORT intra-op threads per instance. @default cores / instances */
  intraOpNumThreads?: number
  /** Force child processes instead of worker threads. @default ep !== 'cpu' && instances > 1 */
  processes?: boolean
  /** Told about runs, exits and restarts of each instance (metrics). Settable later with {@link OrtPool.observe}. */
  observer?: OrtPoolObserver
}

/**
 * Hooks on the life of the pool's instances (numbered from 0), for metrics. Calls are
 * synchronous and must not throw.
 */
export interface OrtPoolObserver {
  /** A run ended on `instance` after `busyMs` (hand-off to answer), successfully or not. */
  run?(instance: number, busyMs: number, ok: boolean): void
  /** `instance` died (thread or process exit); its runs in flight failed. */
  exit?(instance: number): void
  /** `instance` was started again after it died. */
  restart?(instance: number): void
}

interface Host {
  post(msg: unknown, transfer?: ArrayBuffer[]): void
  kill(): void
  busy: boolean
  pending: Map<number, { resolve: (r: RunResult) => void; reject: (e: Error) => void }>
  dead: Error | undefined
  /** Position in the pool (the `instance` of {@link OrtPoolObserver}). */
  index: number
}

/** What one batch run returns. */
export interface RunResult {
  outputs: Record<string, HostTensor>
  computeMs: number
}

const HOST_URL = new URL('./ort-host.mjs', import.meta.url)

/**
 * N onnxruntime-node sessions off the main thread. `run` hands a batch to a free instance;
 * callers keep at most `instances` runs in flight (the batch engine's concurrency).
 */
export class OrtPool {
  readonly instances: number
  readonly ep: ExecutionProvider
  inputs: HostValueMeta[] = []
  outputs: HostValueMeta[] = []
  readonly #opts: OrtPoolOptions
  readonly #hosts: Host[] = []
  #seq = 0
  #closing: Promise<void> | undefined
  #observer: OrtPoolObserver | undefined

  constructor(opts: OrtPoolOptions) {
    this.#opts = opts
    this.#observer = opts.observer
    this.instances = Math.max(1, opts.instances ?? 1)
    this.ep = opts.ep ?? 'cpu'
  }

  /** Set the observer of instance runs, exits and restarts (replaces the one given). */
  observe(o: OrtPoolObserver | undefined): void {
    this.#observer = o
  }

  /** Instances by state now. */
  states(): { live: number; dead: number } {
    const dead = this.#hosts.filter((h) => h.dead).length
    return { live: this.#hosts.length - dead, dead }
  }

  /** Start every instance and load the model; rejects with a clear message on failure. */
  async start(): Promise<void> {
    const threads =
      this.#opts.intraOpNumThreads ?? Math.max(1, Math.floor(availableParallelism() / this.instances))
    const useProcesses = this.#opts.processes ?? (this.ep !== 'cpu' && this.instances > 1)
    const loads: Promise<void>[] = []
    for (let i = 0; i < this.instances; i++) {
      const host = useProcesses ? this.#spawnProcess() : this.#spawnThread()
      host.index = i
      this.#hosts.push(host)
      loads.push(
        new Promise<void>((resolve, reject) => {
          host.pending.set(-1, {
            resolve: (r) => {
              const m = r as unknown as { inputs: HostValueMeta[]; outputs: HostValueMeta[] }
              this.inputs = m.inputs
              this.outputs = m.outputs
              resolve()
            },
            reject,
          })
        }),
      )
      host.post({ type: 'load', path: this.#opts.path, ep: this.ep, intraOpNumThreads: threads })
    }
    try {
      await Promise.all(loads)
    } catch (e) {
      await this.close()
      throw e
    }
  }

  /** Run one batch on a free instance. */
  run(feeds: Record<string, HostTensor>): Promise<RunResult> {
    const host = this.#hosts.find((h) => !h.busy && !h.dead) ?? this.#hosts.find((h) => !h.dead)
    if (!host) {
      return Promise.reject(new CohortError('INTERNAL', 'no live ONNX Runtime instance'))
    }
    const id = ++this.#seq
    const transfer: ArrayBuffer[] = []
    for (const f of Object.values(feeds)) {
      if (!Array.isArray(f.data) && f.data.buffer instanceof ArrayBuffer) {
        transfer.push(f.data.buffer)
      }
    }
    host.busy = true
    const started = performance.now()
    const ended = (ok: boolean) => this.#observer?.run?.(host.index, performance.now() - started, ok)
    return new Promise<RunResult>((resolve, reject) => {
      host.pending.set(id, {
        resolve: (r) => {
          host.busy = false
          ended(true)
          resolve(r)
        },
        reject: (e) => {
          host.busy = false
          ended(false)
          reject(e)
        },
      })
      host.post({ type: 'run', id, feeds }, transfer)
    })
  }

  /** Release every session and end the threads or processes. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await Promise.allSettled(
        this.#hosts.map(async (h) => {
          if (h.dead) {
            return // its channel is gone: a send would raise an unhandled 'error'
          }
          h.post({ type: 'close' })
          await new Promise((r) => setTimeout(r, 50))
          h.kill()
        }),
      )
    })()
    return this.#closing
  }

  #onMessage(host: Host, msg: Record<string, unknown>): void {
    const type = msg['type']
    if (type === 'ready' || type === 'load-error') {
      const p = host.pending.get(-1)
      host.pending.delete(-1)
      if (type === 'ready') {
        p?.resolve(msg as unknown as RunResult)
      } else {
        p?.reject(loadError(this.ep, String(msg['message'])))
      }
      return
    }
    const id = msg['id'] as number
    const p = host.pending.get(id)
    host.pending.delete(id)
    if (type === 'result') {
      p?.resolve({ outputs: msg['outputs'] as RunResult['outputs'], computeMs: msg['computeMs'] as number })
    } else {
      p?.reject(new CohortError('PREDICTOR_FAILED', `onnxruntime: ${String(msg['message'])}`))
    }
  }

  #onExit(host: Host, why: string): void {
    if (host.dead) {
      return // 'error' then 'exit': one death
    }
    const err = new CohortError('INTERNAL', `ONNX Runtime instance exited: ${why}`)
    host.dead = err
    if (!this.#closing) {
      this.#observer?.exit?.(host.index)
    }
    for (const p of host.pending.values()) {
      p.reject(err)
    }
    host.pending.clear()
  }

  #spawnThread(): Host {
    const w = new Worker(HOST_URL)
    const host: Host = {
      post: (m, t) => w.postMessage(m, t ?? []),
      kill: () => void w.terminate(),
      busy: false,
      pending: new Map(),
      dead: undefined,
      index: 0,
    }
    w.on('message', (m: Record<string, unknown>) => this.#onMessage(host, m))
    w.on('error', (e) => this.#onExit(host, e.message))
    w.on('exit', (code) => this.#onExit(host, `thread exit ${code}`))
    return host
  }

  #spawnProcess(): Host {
    const cp: ChildProcess = fork(HOST_URL, [], { serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    const host: Host = {
      post: (m) => cp.send(m as never),
      kill: () => void cp.kill(),
      busy: false,
      pending: new Map(),
      dead: undefined,
      index: 0,
    }
    cp.on('message', (m) => this.#onMessage(host, m as Record<string, unknown>))
    cp.on('exit', (code, sig) => this.#onExit(host, `process exit ${code ?? sig}`))
    return host
  }
}

function loadError(ep: ExecutionProvider, message: string): Error {
  if (ep !== 'cpu' && /provider|backend|webgpu|cuda|not (found|supported|available)/i.test(message)) {
    return new Error(
      `execution provider "${ep}" is not available: ${message}` +
        (ep === 'cuda' ? ' (install the CUDA EP with `npm i onnxruntime-node --onnxruntime-node-install=cuda12`)' : ''),
    )
  }
  return new Error(`cannot load model: ${message}`)
}
