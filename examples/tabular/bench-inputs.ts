/** Inputs of `cohort bench pipeline examples/tabular`: `n` varied Titanic-like rows (deterministic). */
export default function benchInputs(n: number): Record<string, unknown>[] {
  const sexes = ['male', 'female']
  const ports = ['S', 'C', 'Q']
  return Array.from({ length: n }, (_, i) => ({
    pclass: (i % 3) + 1,
    sex: sexes[(i >> 1) % 2],
    age: 1 + ((i * 13) % 79),
    sibsp: (i * 7) % 5,
    parch: (i * 3) % 4,
    fare: 4 + ((i * 37) % 500) + (i % 7) / 7,
    embarked: ports[(i * 5) % 3],
  }))
}
