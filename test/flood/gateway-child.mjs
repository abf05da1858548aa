// `cohort gateway` (the real CLI entry) with one addition for the flood test: on the IPC message
// "mem" it runs a full GC and sends back process.memoryUsage(). Started with --expose-gc.
import { register } from 'tsx/esm/api'

register()
process.on('message', (m) => {
  if (m === 'mem') {
    globalThis.gc?.()
    globalThis.gc?.()
    process.send?.({ ...process.memoryUsage() })
  }
})
await import('../../apps/cli/src/main.ts')
