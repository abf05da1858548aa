// The generation host: a worker thread that owns one onnxruntime-node session and the
// @cohort/generative engine (scheduler, KV slab, sampling), so session.run and the KV cache stay
// off the worker's main thread. Plain JS so it needs no TypeScript loader itself; it registers tsx
// and imports gen-thread.ts. Protocol: see onnx-generator.ts.
import { register } from 'tsx/esm/api'

register()
await import('./gen-thread.ts')
