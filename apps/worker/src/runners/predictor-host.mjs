// The predictor host: one `definePredictor` predictor in a worker thread, so that its setup() and
// predict() never block the worker's main thread (NATS I/O, heartbeats, other models).
// Plain JS so it needs no TypeScript loader itself; it registers tsx to import the module.
// Protocol (structured clone):
//   workerData:     {path, name, servedAs}  (name: the predictor's own; servedAs: the model name it serves as)
//   host -> parent: {type:'ready'} | {type:'setup-error', message}
//                   {type:'result', id, items: [{v} | {e: {code, message}}]}
//                   {type:'run-error', id, code, message}
//                   {type:'closed'}
//   parent -> host: {type:'run', id, inputs, batchSize} | {type:'close'}
import { parentPort, workerData } from 'node:worker_threads'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

const BRAND = Symbol.for('cohort.predictor')
const port = parentPort
const ac = new AbortController()

function codeOf(e) {
  const c = e && typeof e === 'object' ? e.code : undefined
  return typeof c === 'string' ? c : 'PREDICTOR_FAILED'
}

function messageOf(e) {
  return e instanceof Error ? e.message : String(e)
}

async function find(path, name) {
  // Both hooks, as bin/cohort.js registers them, whatever the module's own extension: a .js or
  // .mjs module imports @cohort/predictor, whose package ships TypeScript sources; a .ts file in
  // a package that is not "type": "module" is compiled to CommonJS and requires its imports.
  const { register } = await import('tsx/esm/api')
  register()
  const cjs = await import('tsx/cjs/api')
  cjs.register()
  let mod = await import(pathToFileURL(resolve(path)).href)
  // CommonJS-compiled TypeScript: the author's exports are in `default` (module-exports.ts).
  if (mod.default && typeof mod.default === 'object' && mod.default.__esModule === true) {
    mod = mod.default
  }
  for (const v of Object.values(mod)) {
    for (const x of Array.isArray(v) ? v : [v]) {
      if (x && typeof x === 'object' && x[BRAND] === true && x.name === name) {
        return x
      }
    }
  }
  throw new Error(`${path} exports no predictor named "${name}"`)
}

/** One result per item; an item that cannot be cloned fails alone. */
function post(id, out) {
  const items = out.map((v) => (v instanceof Error ? { e: { code: codeOf(v), message: v.message } } : { v }))
  try {
    port.postMessage({ type: 'result', id, items })
  } catch {
    const safe = items.map((it, i) => {
      if (it.e) {
        return it
      }
      try {
        structuredClone(it.v)
        return it
      } catch (e) {
        return {
          e: {
            code: 'PREDICTOR_FAILED',
            message: `output of item ${i} cannot leave the predictor thread (it must be structured-cloneable): ${messageOf(e)}`,
          },
        }
      }
    })
    port.postMessage({ type: 'result', id, items: safe })
  }
}

let predictor
try {
  predictor = await find(workerData.path, workerData.name)
  await predictor.setup({ name: workerData.servedAs ?? workerData.name, signal: ac.signal })
  port.postMessage({ type: 'ready' })
} catch (e) {
  port.postMessage({ type: 'setup-error', message: messageOf(e) })
}

port.on('message', (msg) => {
  if (msg.type === 'run') {
    Promise.resolve()
      .then(() => predictor.predictBatch(msg.inputs, { batchSize: msg.batchSize, signal: ac.signal }))
      .then(
        (out) => post(msg.id, out),
        (e) => port.postMessage({ type: 'run-error', id: msg.id, code: codeOf(e), message: messageOf(e) }),
      )
  } else if (msg.type === 'close') {
    ac.abort()
    Promise.resolve(predictor?.teardown())
      .catch(() => undefined)
      .finally(() => {
        port.postMessage({ type: 'closed' })
        port.close()
      })
  }
})
