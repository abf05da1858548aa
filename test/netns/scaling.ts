// Scaling benchmark (docs/benchmarks.md#scaling-over-workers): prints throughput with 1, 2 and 4
// workers of the sleep-based sleepy predictor on separate network-namespace hosts, with ratios.
//   sudo node --import tsx test/netns/scaling.ts [--cost-ms 50] [--duration-ms 6000]
import { parseArgs } from 'node:util'
import { measureScaling, scalingTable } from './support/scaling.ts'

const { values: v } = parseArgs({
  options: { 'cost-ms': { type: 'string', default: '50' }, 'duration-ms': { type: 'string', default: '6000' } },
})
const r = await measureScaling({ costMs: Number(v['cost-ms']), durationMs: Number(v['duration-ms']) })
console.log(`scaling: sleepy predictor, ${r.costMs} ms per request, --max-batch-size 1, 4 requests in flight per worker`)
console.log(scalingTable(r))
const worst = Math.min(...r.rows.map((w) => w.efficiency))
console.log(`worst efficiency ${worst.toFixed(2)} (target >= 0.90): ${worst >= 0.9 ? 'met' : 'NOT met'}`)
