// The ORT host: one onnxruntime-node session in a worker thread or a child process.
// Plain JS so it needs no TypeScript loader. Protocol (structured clone; buffers transferred):
//   parent -> host: {type:'load', path, ep, intraOpNumThreads, allowSpinning, warmup}
//                   {type:'run', id, feeds: {name: {type, dims, data}}}
//                   {type:'close'}
//   host -> parent: {type:'ready', inputs, outputs} | {type:'load-error', message}
//                   {type:'result', id, outputs: {name: {type, dims, data}}, computeMs}
//                   {type:'run-error', id, message}
import { parentPort, isMainThread } from 'node:worker_threads'
import * as ort from 'onnxruntime-node'

/** @type {ort.InferenceSession | undefined} */
let session

const port = isMainThread
  ? { post: (m) => process.send?.(m), on: (fn) => process.on('message', fn) }
  : { post: (m, t) => parentPort?.postMessage(m, t ?? []), on: (fn) => parentPort?.on('message', fn) }

function meta(list) {
  return list.map((m) => ({
    name: m.name,
    isTensor: m.isTensor,
    type: m.isTensor ? m.type : 'unknown',
    shape: m.isTensor ? m.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)) : [],
    dimNames: m.isTensor ? m.shape.map((d) => (typeof d === 'string' ? d : null)) : [],
  }))
}

function toTensor(f) {
  if (f.type === 'string') {
    return new ort.Tensor('string', f.data, f.dims)
  }
  return new ort.Tensor(f.type, f.data, f.dims)
}

async function load(msg) {
  const providers = msg.ep === 'cpu' ? ['cpu'] : [msg.ep]
  const options = { executionProviders: providers, graphOptimizationLevel: 'all' }
  if (msg.intraOpNumThreads > 0) {
    options.intraOpNumThreads = msg.intraOpNumThreads
    options.interOpNumThreads = 1
  }
  // Idle pool threads sleep instead of spinning unless asked (session.intra_op.allow_spinning).
  options.extra = { session: { intra_op: { allow_spinning: msg.allowSpinning ? '1' : '0' } } }
  session = await ort.InferenceSession.create(msg.path, options)
  port.post({ type: 'ready', inputs: meta(session.inputMetadata), outputs: meta(session.outputMetadata) })
}

async function run(msg) {
  const feeds = {}
  for (const [name, f] of Object.entries(msg.feeds)) {
    feeds[name] = toTensor(f)
  }
  const t0 = performance.now()
  const out = await session.run(feeds)
  const computeMs = performance.now() - t0
  const outputs = {}
  const transfer = []
  for (const [name, t] of Object.entries(out)) {
    const data = t.data
    outputs[name] = { type: t.type, dims: [...t.dims], data }
    if (!Array.isArray(data) && data.buffer instanceof ArrayBuffer) {
      transfer.push(data.buffer)
    }
    t.dispose?.()
  }
  port.post({ type: 'result', id: msg.id, outputs, computeMs }, isMainThread ? undefined : transfer)
}

port.on((msg) => {
  if (msg.type === 'load') {
    load(msg).catch((e) => port.post({ type: 'load-error', message: String(e?.message ?? e) }))
  } else if (msg.type === 'run') {
    run(msg).catch((e) => port.post({ type: 'run-error', id: msg.id, message: String(e?.message ?? e) }))
  } else if (msg.type === 'close') {
    Promise.resolve(session?.release())
      .catch(() => undefined)
      .finally(() => {
        if (isMainThread) {
          process.exit(0)
        } else {
          parentPort?.close()
        }
      })
  }
})
