// Child of onnx-runner-close.test.ts: start an OnnxRunner on `argv[2]`, close it `argv[3]` ms
// later, then exit at once, as a worker SIGTERMed during a repository load does. Exit code 0
// unless ONNX Runtime aborts the process (SIGABRT) because a native call was still in flight.
import { OnnxRunner } from './onnx-runner.ts'

const [path, delay] = process.argv.slice(2)
const runner = new OnnxRunner({ name: 'm', path: path ?? '' })
const started = runner.start().then(
  () => 'started',
  (e: unknown) => `start failed: ${e instanceof Error ? e.message : String(e)}`,
)
await new Promise((r) => setTimeout(r, Number(delay)))
await runner.close()
console.log(await started)
process.exit(0)
