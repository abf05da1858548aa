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
  /** ORT intra-op threads per instance. @default defaultIntraOpThreads(instances) */
  intraOpNumThreads?: number
  /**
   * Let idle ORT pool threads spin (`session.intra_op.allow_spinning`). Spinning burns CPU that
   * the serving path (HTTP, NATS, the worker's main thread) needs when they share cores.
   * @default false
   */
  allowSpinning?: boolean
  /** Force child processes instead of worker threads. @default ep !== 'cpu' && instances > 1 */
  processes?: boolean
}

interface Host {
  post(msg: unknown, transfer?: ArrayBuffer[]): void
  kill(): void
  busy: boolean
  pending: Map<number, { resolve: (r: RunResult) => void; reject: (e: Error) => void }>
  dead: Error | undefined
}

/** What one batch run returns. */
export interface RunResult {
  outputs: Record<string, HostTensor>
  computeMs: number
}

const HOST_URL = new URL('./ort-host.mjs', import.meta.url)

/**
 * Default ORT intra-op threads per instance: the cores less one (left to the serving path: the
 * worker's main thread, NATS, a gateway on the same host), shared by the instances, at least 1.
 * On 2 cores that is 1 thread (docs/benchmarks.md#thread-defaults).
 */
export function defaultIntraOpThreads(instances: number, cores = availableParallelism()): number {
  return Math.max(1, Math.floor((cores - 1) / Math.max(1, instances)))
}

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

  constructor(opts: OrtPoolOptions) {
    this.#opts = opts
    this.instances = Math.max(1, opts.instances ?? 1)
    this.ep = opts.ep ?? 'cpu'
  }

  /** Start every instance and load the model; rejects with a clear message on failure. */
  async start(): Promise<void> {
    const threads = this.#opts.intraOpNumThreads ?? defaultIntraOpThreads(this.instances)
    const useProcesses = this.#opts.processes ?? (this.ep !== 'cpu' && this.instances > 1)
    const loads: Promise<void>[] = []
    for (let i = 0; i < this.instances; i++) {
      const host = useProcesses ? this.#spawnProcess() : this.#spawnThread()
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
      host.post({ type: 'load', path: this.#opts.path, ep: this.ep, intraOpNumThreads: threads, allowSpinning: this.#opts.allowSpinning ?? false })
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
    return new Promise<RunResult>((resolve, reject) => {
      host.pending.set(id, {
        resolve: (r) => {
          host.busy = false
          resolve(r)
        },
        reject: (e) => {
          host.busy = false
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
    const err = new CohortError('INTERNAL', `ONNX Runtime instance exited: ${why}`)
    host.dead = err
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
