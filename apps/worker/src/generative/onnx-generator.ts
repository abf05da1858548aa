/**
 * The ORT-backed {@link Generator}: `createOnnxGenerator(path, options)` starts a worker thread
 * (gen-host.mjs) that owns the onnxruntime-node session, the KV slab and the `@cohort/generative`
 * engine; the main thread tokenizes and validates (so `submit` throws at once for a request that
 * can never run) and calls each generation's sink from the thread's one message per step.
 * @module
 */
import { Worker } from 'node:worker_threads'
import { checkRequest, emptyMetrics, type DecoderNames, type DecoderSpec, type EngineMetrics, type EngineOptions, type FinishedInfo } from '@cohort/generative'
import {
  CohortError,
  type GenerateInput,
  type GenerationSink,
  type GenerationWatcher,
  type GenerativeInfo,
  type Generator,
  type GeneratorGauges,
  type WireError,
} from '@cohort/protocol'
import { defaultIntraOpThreads } from '../ort/ort-pool.ts'
import type { ThreadConfig, ThreadEvent } from './gen-thread.ts'
import { tokenizerByName, type TokenizerName } from './tokenizers.ts'

const HOST_URL = new URL('./gen-host.mjs', import.meta.url)

/** Options of {@link createOnnxGenerator}; engine options are documented on `EngineOptions` (@cohort/generative). */
export interface OnnxGeneratorOptions extends Pick<EngineOptions, 'maxSequences' | 'kvBudgetTokens' | 'maxStepTokens' | 'batching' | 'ttftTimeoutMs' | 'slo'> {
  /** `'gpt2'` (gpt-tokenizer) or `'bytes'` (the tiny test decoder's). @default 'gpt2' when the model's vocabulary is 50257, else 'bytes' */
  tokenizer?: TokenizerName
  /** Longest prompt + output. @default the model's `cohort.max_context` metadata (required otherwise) */
  maxContext?: number
  /** @default the model's `cohort.eos_token_id` metadata, else the tokenizer's */
  eosId?: number
  /** I/O names. @default the Optimum names */
  names?: Partial<DecoderNames>
  /** ORT intra-op threads. @default defaultIntraOpThreads(1) (cores less one) */
  intraOpNumThreads?: number
  /** Name of the chat template reported in `info` (docs/generative.md#chat-template). @default none */
  chatTemplate?: string
}

/** A {@link Generator} with its engine's metrics (the latest step's) and the detected model shape. */
export interface OnnxGenerator extends Generator {
  readonly spec: DecoderSpec
  metrics(): EngineMetrics
  /** The engine's first tokens and ends, replayed from the thread's step messages before their sink calls. */
  watch(w: GenerationWatcher): void
  gauges(): GeneratorGauges
}

interface Live {
  sink: GenerationSink
}

/** Loads the model in a worker thread; rejects with the thread's reason when it cannot be served. */
export async function createOnnxGenerator(path: string, options: OnnxGeneratorOptions = {}): Promise<OnnxGenerator> {
  const cfg: ThreadConfig = {
    path,
    tokenizer: options.tokenizer ?? 'auto',
    ...(options.maxContext !== undefined ? { maxContext: options.maxContext } : {}),
    ...(options.eosId !== undefined ? { eosId: options.eosId } : {}),
    ...(options.names !== undefined ? { names: options.names } : {}),
    intraOpNumThreads: options.intraOpNumThreads ?? defaultIntraOpThreads(1),
    engine: {
      ...(options.maxSequences !== undefined ? { maxSequences: options.maxSequences } : {}),
      ...(options.kvBudgetTokens !== undefined ? { kvBudgetTokens: options.kvBudgetTokens } : {}),
      ...(options.maxStepTokens !== undefined ? { maxStepTokens: options.maxStepTokens } : {}),
      ...(options.batching !== undefined ? { batching: options.batching } : {}),
      ...(options.ttftTimeoutMs !== undefined ? { ttftTimeoutMs: options.ttftTimeoutMs } : {}),
      ...(options.slo !== undefined ? { slo: options.slo } : {}),
    },
  }
  return startThread(cfg, options.chatTemplate)
}

async function startThread(cfg: ThreadConfig, chatTemplate?: string): Promise<OnnxGenerator> {
  const w = new Worker(HOST_URL, { workerData: cfg })
  const live = new Map<number, Live>()
  let metrics = emptyMetrics(0)
  const watchers: GenerationWatcher[] = []
  let dead: WireError | undefined
  let closing: Promise<void> | undefined
  let seq = 0

  const endAll = (e: WireError): void => {
    endGenerations(live, e)
  }

  type Ready = { info: GenerativeInfo; spec: DecoderSpec; tokenizer: TokenizerName }
  const ready = new Promise<Ready>((resolve, reject) => {
    w.on(
      'message',
      (m: { type: string; events?: ThreadEvent[]; metrics?: EngineMetrics; firstTokens?: number[]; finished?: FinishedInfo[]; message?: string } & Partial<Ready>) => {
        if (m.type === 'ready') {
          metrics = m.metrics ?? metrics
          resolve({ info: m.info as GenerativeInfo, spec: m.spec as DecoderSpec, tokenizer: m.tokenizer as TokenizerName })
        } else if (m.type === 'load-error') reject(new Error(`generative model ${cfg.path}: ${m.message}`))
        else if (m.type === 'events') {
          metrics = m.metrics ?? metrics
          for (const x of watchers) {
            for (const ms of m.firstTokens ?? []) x.firstToken?.(ms)
            for (const f of m.finished ?? []) x.finished?.(f)
          }
          deliver(live, m.events ?? [])
        }
      },
    )
    w.on('error', (e) => {
      dead = { code: 'WORKER_LOST', message: `the generation thread failed: ${e.message}`, retryAfterS: 1 }
      reject(e)
      endAll(dead)
    })
    w.on('exit', (code) => {
      dead ??= { code: 'WORKER_LOST', message: `the generation thread exited (code ${code})`, retryAfterS: 1 }
      reject(new Error(dead.message))
      endAll(dead)
    })
  })
  const loaded = await loadedOrEnded(w, ready)
  const info: GenerativeInfo = { ...loaded.info, ...(chatTemplate !== undefined ? { chatTemplate } : {}) }
  const ctx = { tokenizer: tokenizerByName(loaded.tokenizer).tokenizer, vocabSize: loaded.spec.vocabSize, maxContext: loaded.spec.maxContext, eosId: loaded.spec.eosId }
  return {
    info,
    spec: loaded.spec,
    metrics: () => metrics,
    watch: (x) => void watchers.push(x),
    gauges: () => ({ running: metrics.running, waiting: metrics.waiting, kvTokens: metrics.kvTokens, kvBudgetTokens: metrics.kvBudgetTokens, preemptions: metrics.preemptions }),
    submit(input: GenerateInput, deadline: number, sink: GenerationSink): { cancel(): void } {
      if (closing) throw new CohortError('SHUTTING_DOWN', 'the generator is closed')
      if (dead) throw new CohortError('WORKER_LOST', dead.message, { retryAfterS: 1 })
      const prompt = checkRequest(input, deadline, ctx)
      const id = ++seq
      live.set(id, { sink })
      w.postMessage({
        type: 'submit',
        id,
        prompt,
        params: input.params,
        stream: input.stream,
        deadline,
        ...(input.firstTokenDeadline !== undefined ? { firstTokenDeadline: input.firstTokenDeadline } : {}),
      })
      return {
        cancel: () => {
          if (live.has(id) && !dead) w.postMessage({ type: 'cancel', id })
        },
      }
    },
    close(): Promise<void> {
      closing ??= closeThread(w, dead === undefined, () => endAll({ code: 'WORKER_LOST', message: 'the generator closed before the generation ended', retryAfterS: 1 }))
      return closing
    },
  }
}

/** Hand each thread event to its generation's sink; a throwing sink does not stop the others. */
function deliver(live: Map<number, Live>, events: readonly ThreadEvent[]): void {
  for (const ev of events) {
    const l = live.get(ev.id)
    if (!l) continue
    try {
      if ('delta' in ev) l.sink.delta(ev.delta)
      else if ('done' in ev) {
        live.delete(ev.id)
        l.sink.done(ev.done)
      } else {
        live.delete(ev.id)
        l.sink.error(ev.error)
      }
    } catch {
      // a throwing sink must not stop the others
    }
  }
}

/** End every running generation with `e`; a throwing sink does not stop the others. */
function endGenerations(live: Map<number, Live>, e: WireError): void {
  for (const [, l] of live) {
    try {
      l.sink.error(e)
    } catch {
      // a throwing sink must not stop the others
    }
  }
  live.clear()
}

/** The thread's ready message; a thread that fails to load is terminated and the failure thrown. */
async function loadedOrEnded<T>(w: Worker, ready: Promise<T>): Promise<T> {
  try {
    return await ready
  } catch (e) {
    await w.terminate()
    throw e
  }
}

/** Stop the thread: a live one is asked to close and awaited (its exit or its `closed`); then `endAll` and terminate. */
async function closeThread(w: Worker, live: boolean, endAll: () => void): Promise<void> {
  if (live) {
    const closed = new Promise<void>((resolve) => {
      w.once('exit', () => resolve())
      w.on('message', (m: { type: string }) => {
        if (m.type === 'closed') resolve()
      })
    })
    w.postMessage({ type: 'close' })
    await closed
  }
  endAll()
  await w.terminate()
}
