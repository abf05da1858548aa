import { fork, type ChildProcess } from 'node:child_process'
import { availableParallelism } from 'node:os'
import { Worker } from 'node:worker_threads'
import { CohortError } from '@cohort/protocol'
import { TimeLimits, type RestartReason, type RunnerEvents } from '../runners/types.ts'

/** First pause before a replacement instance that failed to load is tried again, ms (doubles up to 30 s). */
const RESTART_RETRY_MS = 500

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
  /** Told about runs, exits and restarts of each instance (metrics). Settable later with {@link OrtPool.watch}. */
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
  /** `instance` was started again after it died or was replaced. */
  restart?(instance: number): void
}

interface Host {
  post(msg: unknown, transfer?: ArrayBuffer[]): void
  /** End it now, even in the middle of a native `session.run()` (SIGKILL for a process). */
  kill(): Promise<void>
  busy: boolean
  pending: Map<number, { resolve: (r: RunResult) => void; reject: (e: Error) => void }>
  dead: Error | undefined
  /** Loaded and taking runs. */
  live: boolean
  /** The child's pid (processes only). */
  pid: number | undefined
  /** A thread replaced while its run was in native code: ended once that run returns. */
  retiring: boolean
  /** Position in the pool (the `instance` of {@link OrtPoolObserver}); a replacement keeps it. */
  index: number
}

/** Options of one {@link OrtPool.run}. */
export interface OrtRunOptions {
  /** Time limit of the run in ms: past it the instance is ended and replaced (BATCH_TIMEOUT). */
  timeoutMs?: number
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
  /** Its runs' time limits, on one timer. */
  readonly #limits = new TimeLimits()
  #seq = 0
  #closing: Promise<void> | undefined
  /** Whether close() was called (a method, so code across awaits reads it afresh). */
  #isClosing(): boolean {
    return this.#closing !== undefined
  }
  #events: RunnerEvents | undefined
  #observer: OrtPoolObserver | undefined

  constructor(opts: OrtPoolOptions) {
    this.#opts = opts
    this.instances = Math.max(1, opts.instances ?? 1)
    this.ep = opts.ep ?? 'cpu'
    this.#observer = opts.observer
  }

  /** Start every instance and load the model; rejects with a clear message on failure. */
  async start(): Promise<void> {
    const loads: Promise<void>[] = []
    for (let i = 0; i < this.instances; i++) {
      const { host, loaded } = this.#launch(i)
      this.#hosts.push(host)
      loads.push(loaded)
    }
    try {
      await Promise.all(loads)
    } catch (e) {
      await this.close()
      throw e
    }
  }

  /** Receive restart events (metrics, logs). */
  observe(events: RunnerEvents): void {
    this.#events = events
  }

  /** Set the observer of instance runs, exits and restarts (replaces the one given). */
  watch(o: OrtPoolObserver | undefined): void {
    this.#observer = o
  }

  /** Instances by state now: `live` take runs, `dead` do not (died, or their replacement is loading). */
  states(): { live: number; dead: number } {
    const live = this.#hosts.filter((h) => h.live).length
    return { live, dead: this.#hosts.length - live }
  }

  /** Instances loaded and taking runs. */
  get live(): number {
    return this.#hosts.filter((h) => h.live).length
  }

  /** Pids of the instances' child processes (processes only; for operators and tests). */
  get pids(): number[] {
    return this.#hosts.flatMap((h) => (h.pid !== undefined && h.live ? [h.pid] : []))
  }

  /** Spawn one instance and load the model in it. */
  #launch(index: number): { host: Host; loaded: Promise<void> } {
    const threads = this.#opts.intraOpNumThreads ?? defaultIntraOpThreads(this.instances)
    const useProcesses = this.#opts.processes ?? (this.ep !== 'cpu' && this.instances > 1)
    const host = useProcesses ? this.#spawnProcess() : this.#spawnThread()
    host.index = index
    const loaded = new Promise<void>((resolve, reject) => {
      host.pending.set(-1, {
        resolve: (r) => {
          const m = r as unknown as { inputs: HostValueMeta[]; outputs: HostValueMeta[] }
          this.inputs = m.inputs
          this.outputs = m.outputs
          host.live = !host.dead
          resolve()
          this.#wakeWaiters()
        },
        reject,
      })
    })
    host.post({ type: 'load', path: this.#opts.path, ep: this.ep, intraOpNumThreads: threads, allowSpinning: this.#opts.allowSpinning ?? false })
    return { host, loaded }
  }

  /**
   * Replace `host` (a run past its limit, or it died): end it, start a new instance in its slot,
   * and try again with a growing pause until one loads or the pool closes.
   */
  #replace(host: Host, reason: RestartReason, detail: string): void {
    const i = this.#hosts.indexOf(host)
    if (i < 0 || this.#closing) {
      return
    }
    host.live = false
    this.#events?.restarting(reason, detail)
    const t0 = performance.now()
    if (host.pid === undefined && host.busy) {
      // Terminating a worker thread while onnxruntime-node is inside session.run() aborts the whole
      // process once the native call returns (measured: SIGABRT, "terminate called after throwing an
      // instance of 'Napi::Error'"). So the thread is retired: it is ended when its run returns, and
      // a new thread takes its slot now. Only a process (SIGKILL) can stop a run that never returns.
      host.retiring = true
      for (const p of host.pending.values()) {
        p.reject(new CohortError('BATCH_TIMEOUT', 'the run was abandoned'))
      }
      host.pending.clear()
    } else {
      void host.kill().catch(() => undefined)
    }
    if (host.retiring) {
      this.#retired.add(host)
    }
    void (async () => {
      for (let retry = RESTART_RETRY_MS; !this.#closing; retry = Math.min(30_000, retry * 2)) {
        const { host: next, loaded } = this.#launch(i)
        this.#hosts[i] = next
        try {
          await loaded
          // close() may have run while `loaded` was awaited: a fresh read.
          if (this.#isClosing()) {
            await next.kill()
            return
          }
          this.#events?.restarted(reason, performance.now() - t0)
          this.#observer?.restart?.(i)
          return
        } catch (e) {
          void next.kill().catch(() => undefined)
          this.#events?.restartFailed(reason, e, retry)
          await new Promise((r) => setTimeout(r, retry))
        }
      }
    })()
  }

  #waiters: (() => void)[] = []
  /** Threads retired in the middle of a native run (see #replace). */
  readonly #retired = new Set<Host>()

  #wakeWaiters(): void {
    for (const w of this.#waiters.splice(0)) {
      w()
    }
  }

  /**
   * Run one batch on a free instance (waiting for one while every instance is being replaced).
   * Past `opts.timeoutMs` it rejects with BATCH_TIMEOUT and the instance is ended and replaced.
   */
  async run(feeds: Record<string, HostTensor>, opts: OrtRunOptions = {}): Promise<RunResult> {
    let host = this.#pick()
    while (!host) {
      if (this.#closing) {
        throw new CohortError('SHUTTING_DOWN', 'the ONNX Runtime pool is closed')
      }
      await new Promise<void>((r) => this.#waiters.push(r))
      host = this.#pick()
    }
    const h = host
    const id = ++this.#seq
    const transfer: ArrayBuffer[] = []
    for (const f of Object.values(feeds)) {
      if (!Array.isArray(f.data) && f.data.buffer instanceof ArrayBuffer) {
        transfer.push(f.data.buffer)
      }
    }
    h.busy = true
    const started = performance.now()
    const ended = (ok: boolean): void => this.#observer?.run?.(h.index, performance.now() - started, ok)
    const done = new Promise<RunResult>((resolve, reject) => {
      h.pending.set(id, {
        resolve: (r) => {
          h.busy = false
          ended(true)
          resolve(r)
        },
        reject: (e) => {
          h.busy = false
          ended(false)
          reject(e)
        },
      })
      h.post({ type: 'run', id, feeds }, transfer)
    })
    return this.#limits.run(done, opts.timeoutMs, 'an ONNX Runtime run', () => this.#replace(h, 'batch_timeout', `session.run() ran past ${opts.timeoutMs} ms`))
  }

  #pick(): Host | undefined {
    return this.#hosts.find((h) => !h.busy && h.live) ?? this.#hosts.find((h) => h.live)
  }

  /** Release every session and end the threads or processes. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#wakeWaiters()
      await Promise.allSettled(
        [...this.#hosts, ...this.#retired].map(async (h) => {
          h.live = false
          if (h.retiring && !h.dead) {
            return // still inside a native run: see #replace; it ends when the run returns
          }
          if (!h.dead) {
            h.post({ type: 'close' })
            await new Promise((r) => setTimeout(r, 50))
          }
          await h.kill()
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
    if (host.retiring) {
      // The abandoned run returned: the thread is out of native code and can go.
      host.busy = false
      void host.kill().catch(() => undefined)
      return
    }
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
      return
    }
    this.#retired.delete(host)
    const err = new CohortError('INTERNAL', `ONNX Runtime instance exited: ${why}`)
    const wasLive = host.live
    if (!this.#closing) {
      this.#observer?.exit?.(host.index)
    }
    host.dead = err
    host.live = false
    for (const p of host.pending.values()) {
      p.reject(err)
    }
    host.pending.clear()
    // An instance that was serving and ended by itself (crash, OOM kill) is replaced; one ended
    // on purpose (replaced, closing) or that never loaded (start() fails) is not.
    if (wasLive && !this.#closing) {
      this.#replace(host, 'died', why)
    }
  }

  #spawnThread(): Host {
    const w = new Worker(HOST_URL)
    const host: Host = {
      post: (m, t) => {
        if (!host.dead) {
          w.postMessage(m, t ?? [])
        }
      },
      kill: async () => {
        this.#onExit(host, 'ended')
        await w.terminate()
      },
      busy: false,
      pending: new Map(),
      dead: undefined,
      live: false,
      pid: undefined,
      retiring: false,
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
      post: (m) => {
        if (!host.dead && cp.connected) {
          cp.send(m as never)
        }
      },
      kill: async () => {
        this.#onExit(host, 'ended')
        if (cp.exitCode === null && cp.signalCode === null) {
          const gone = new Promise((r) => cp.once('exit', r))
          cp.kill('SIGKILL')
          await gone
        }
      },
      busy: false,
      pending: new Map(),
      dead: undefined,
      live: false,
      pid: cp.pid,
      retiring: false,
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
        (ep === 'cuda' ? ' (the CUDA EP libraries are not installed by default: see "CPU by default, CUDA on request" in docs/packages.md)' : ''),
    )
  }
  return new Error(`cannot load model: ${message}`)
}
