/**
 * Body of the generation thread (gen-host.mjs): loads the model, runs the {@link Engine} loop, and
 * posts each step's events to the main thread in one message. Protocol (structured clone):
 *   workerData:     {@link ThreadConfig}
 *   main -> thread: {type:'submit', id, prompt: number[], params, stream, deadline} | {type:'cancel', id} | {type:'close'}
 *   thread -> main: {type:'ready', info, spec, tokenizer, metrics} | {type:'load-error', message}
 *                   {type:'events', events: ThreadEvent[], metrics, firstTokens: number[] (TTFT ms), finished: FinishedInfo[]} | {type:'closed'}
 * @module
 */
import { readFileSync } from 'node:fs'
import { parentPort, workerData, type MessagePort } from 'node:worker_threads'
import { Engine, OPTIMUM_NAMES, type DecoderNames, type DecoderSpec, type EngineMetrics, type EngineOptions, type FinishedInfo } from '@cohort/generative'
import type { GenerateResult, SamplingParams, TokenDelta, WireError } from '@cohort/protocol'
import * as ort from 'onnxruntime-node'
import { onnxMetadata, usesGroupQueryAttention } from './model-file.ts'
import { ortDecoderSession } from './ort-session.ts'
import { tokenizerByName, type TokenizerName } from './tokenizers.ts'

export interface ThreadConfig {
  path: string
  /** `'auto'`: `'gpt2'` for a 50257-token vocabulary, else `'bytes'`. */
  tokenizer: TokenizerName | 'auto'
  maxContext?: number
  eosId?: number
  names?: Partial<DecoderNames>
  intraOpNumThreads: number
  engine: Pick<EngineOptions, 'maxSequences' | 'kvBudgetTokens' | 'maxStepTokens' | 'batching' | 'ttftTimeoutMs' | 'slo'>
}

export type ThreadEvent = { id: number; delta: TokenDelta } | { id: number; done: GenerateResult } | { id: number; error: WireError }

if (!parentPort) throw new Error('gen-thread runs in a worker thread')
const port: MessagePort = parentPort
const cfg = workerData as ThreadConfig

/** Reads layers, KV heads, head size and vocabulary from the session, the rest from metadata and options. */
function detectSpec(session: ort.InferenceSession, bytes: Uint8Array): { spec: DecoderSpec; tokenizer: TokenizerName } {
  const names = { ...OPTIMUM_NAMES, ...cfg.names }
  const meta = onnxMetadata(bytes)
  if (!usesGroupQueryAttention(bytes) || (meta['cohort.kv_layout'] !== undefined && meta['cohort.kv_layout'] !== 'gqa-shared')) {
    throw new Error(
      'the model has no com.microsoft.GroupQueryAttention: only GQA decoders (shared past/present KV buffer) are served; a plain concat export is not (docs/generative.md#kv-layout)',
    )
  }
  const inputs = session.inputMetadata
  let layers = 0
  while (session.inputNames.includes(names.pastKey.replace('{i}', String(layers)))) layers++
  if (layers === 0) throw new Error(`the model has no ${names.pastKey.replace('{i}', '0')} input`)
  const past = inputs.find((m) => m.name === names.pastKey.replace('{i}', '0'))
  const shape = past && past.isTensor ? past.shape : []
  const [kvHeads, headDim] = [shape[1], shape[3]]
  if (typeof kvHeads !== 'number' || typeof headDim !== 'number') throw new Error(`${past?.name}: KV heads and head size must be fixed dims, got [${shape.join(', ')}]`)
  const logits = session.outputMetadata.find((m) => m.name === names.logits)
  const vocab = logits && logits.isTensor ? logits.shape[2] : undefined
  const name: TokenizerName = cfg.tokenizer !== 'auto' ? cfg.tokenizer : vocab === 50257 ? 'gpt2' : 'bytes'
  const tok = tokenizerByName(name)
  const vocabSize = typeof vocab === 'number' ? vocab : tok.vocabSize
  const maxContext = cfg.maxContext ?? (meta['cohort.max_context'] ? Number(meta['cohort.max_context']) : undefined)
  if (!maxContext) throw new Error('maxContext is not in the model metadata (cohort.max_context): pass it in the options')
  const eosId = cfg.eosId ?? (meta['cohort.eos_token_id'] ? Number(meta['cohort.eos_token_id']) : tok.eosId)
  return { spec: { layers, kvHeads, headDim, vocabSize, maxContext, eosId, layout: 'gqa-shared', names }, tokenizer: name }
}

let outbox: ThreadEvent[] = []
/** The engine's watcher calls since the last message (metrics, replayed on the main thread). */
let firstTokens: number[] = []
let finished: FinishedInfo[] = []
let engine: Engine | undefined
const handles = new Map<number, { cancel(): void }>()

function flush(): void {
  if ((outbox.length === 0 && firstTokens.length === 0 && finished.length === 0) || !engine) return
  port.postMessage({ type: 'events', events: outbox, metrics: engine.metrics() satisfies EngineMetrics, firstTokens, finished })
  outbox = []
  firstTokens = []
  finished = []
}

async function load(): Promise<void> {
  const bytes = readFileSync(cfg.path)
  const session = await ort.InferenceSession.create(bytes, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: cfg.intraOpNumThreads,
    interOpNumThreads: 1,
    extra: { session: { intra_op: { allow_spinning: '0' } } },
  })
  const { spec, tokenizer } = detectSpec(session, bytes)
  engine = new Engine({
    ...cfg.engine,
    session: ortDecoderSession(session),
    model: spec,
    tokenizer: tokenizerByName(tokenizer).tokenizer,
    observer: { step: flush, firstToken: (ms) => void firstTokens.push(ms), finished: (f) => void finished.push(f) },
  })
  engine.start()
  port.postMessage({ type: 'ready', info: engine.info, spec, tokenizer, metrics: engine.metrics() })
}

port.on('message', (m: { type: string; id?: number; prompt?: number[]; params?: SamplingParams; stream?: boolean; deadline?: number; firstTokenDeadline?: number }) => {
  if (m.type === 'submit' && engine) {
    const id = m.id as number
    const sink = {
      delta: (d: TokenDelta) => outbox.push({ id, delta: d }),
      done: (r: GenerateResult) => {
        handles.delete(id)
        outbox.push({ id, done: r })
      },
      error: (e: WireError) => {
        handles.delete(id)
        outbox.push({ id, error: e })
      },
    }
    try {
      const input = {
        prompt: m.prompt as number[],
        params: m.params as SamplingParams,
        stream: m.stream === true,
        ...(m.firstTokenDeadline !== undefined ? { firstTokenDeadline: m.firstTokenDeadline } : {}),
      }
      handles.set(id, engine.submit(input, m.deadline as number, sink))
    } catch (e) {
      const err = e as { code?: string; message?: string }
      outbox.push({ id, error: { code: err.code ?? 'INTERNAL', message: err.message ?? String(e) } })
      flush()
    }
  } else if (m.type === 'cancel') {
    handles.get(m.id as number)?.cancel()
  } else if (m.type === 'close') {
    void (async () => {
      await engine?.close()
      flush()
      port.postMessage({ type: 'closed' })
      port.close()
    })()
  }
})

load().catch((e: unknown) => port.postMessage({ type: 'load-error', message: e instanceof Error ? e.message : String(e) }))
