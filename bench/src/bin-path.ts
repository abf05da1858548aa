import { fileURLToPath } from 'node:url'

/** The benchmarks' own entry (bench/bin/cohort-bench.js), for the processes the bench forks. */
export const BENCH_BIN = fileURLToPath(new URL('../bin/cohort-bench.js', import.meta.url))
