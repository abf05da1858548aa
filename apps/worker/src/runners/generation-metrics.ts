import type { GenerateMetrics } from '@cohort/metrics'
import type { GenerationSink, GenerationTiming, Generator, TokenDelta } from '@cohort/protocol'

/**
 * Records a generator's generations in the `cohort_generate_*` metrics under its model's label
 * (docs/metrics.md#generative-models). A generator with `watch` (the ORT engine) reports first
 * tokens and ends itself and is returned as it is; any other one is returned wrapped, timed from its
 * sink calls: time to first token at the first delta with tokens (so only streamed generations
 * have TTFT and TPOT there), tokens and reasons at `done`/`error`.
 */
export function measuredGenerator(g: Generator, m: GenerateMetrics, model: string): Generator {
  const labels = { model }
  const ended = (t: GenerationTiming): void => {
    m.tokens.inc(labels, t.completionTokens)
    m.promptTokens.inc(labels, t.promptTokens)
    m.finished.inc({ model, reason: t.reason })
    if (t.tpotMs !== undefined) {
      m.tpot.observe(labels, t.tpotMs / 1000)
    }
  }
  if (g.watch) {
    g.watch({ firstToken: (ms) => m.ttft.observe(labels, ms / 1000), finished: ended })
    return g
  }
  return {
    info: g.info,
    close: () => g.close(),
    ...(g.gauges ? { gauges: g.gauges.bind(g) } : {}),
    submit(input, deadline, sink) {
      const t0 = performance.now()
      let first: number | undefined
      let last = 0
      let tokens = 0
      const timing = (): Pick<GenerationTiming, 'ttftMs' | 'tpotMs'> => ({
        ttftMs: first === undefined ? undefined : first - t0,
        tpotMs: first !== undefined && tokens > 1 ? (last - first) / (tokens - 1) : undefined,
      })
      const measured: GenerationSink = {
        delta(d: TokenDelta) {
          if (d.tokens.length > 0) {
            last = performance.now()
            if (first === undefined) {
              first = last
              m.ttft.observe(labels, (first - t0) / 1000)
            }
            tokens += d.tokens.length
          }
          sink.delta(d)
        },
        done(r) {
          ended({ reason: r.finishReason, promptTokens: r.usage.promptTokens, completionTokens: r.usage.completionTokens, ...timing() })
          sink.done(r)
        },
        error(e) {
          ended({ reason: 'error', promptTokens: 0, completionTokens: tokens, ...timing() })
          sink.error(e)
        },
      }
      return g.submit(input, deadline, measured)
    },
  }
}
