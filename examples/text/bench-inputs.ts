/**
 * Inputs of `cohort bench pipeline examples/text`: `n` held-out synthetic texts of 4 to 48 words
 * (every length bucket), top_k 2 (deterministic).
 */
import { syntheticDataset } from './src/synthetic.ts'

export default function benchInputs(n: number): Record<string, unknown>[] {
  return syntheticDataset(n, { seed: 4242 }).map((e) => ({ text: e.text, top_k: 2 }))
}
