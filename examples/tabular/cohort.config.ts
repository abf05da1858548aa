/**
 * Tabular example: Titanic-like rows -> preprocess (normalisation + vocabularies) -> MLP (ONNX)
 * -> postprocess (label + probability).
 *
 *   npx cohort serve examples/tabular                                  # embedded, all fused
 *   npx cohort worker examples/tabular --stage preprocess --nats URL   # one stage on its own
 *
 * See README.md.
 */
import { itemError } from '@cohort/predictor'
import { defineConfig, definePipeline, onnxStage, stage, type ItemTensor } from '@cohort/pipeline'
import { FEATURES, Passenger, Prediction, RowError, decide, featurize } from './features.ts'
import { MODEL_FILE, ensureTabularModel } from './model.ts'

ensureTabularModel()

export const preprocess = stage<Passenger, { input: ItemTensor }>({
  name: 'preprocess',
  batch: { maxBatchSize: 256 },
  run: (rows) =>
    rows.map((r) => {
      try {
        return { input: { datatype: 'FP32', shape: [FEATURES], data: featurize(r) } }
      } catch (e) {
        if (e instanceof RowError) {
          return itemError(e.message, 'INVALID_INPUT')
        }
        throw e
      }
    }),
})

export const mlp = onnxStage({ name: 'mlp', model: MODEL_FILE, batch: { maxBatchSize: 256 } })

export const postprocess = stage<{ logits: ItemTensor }, Prediction>({
  name: 'postprocess',
  batch: { maxBatchSize: 256 },
  run: (outs) => outs.map((o) => decide(o.logits.data as Float32Array)),
})

export const tabular = definePipeline({
  name: 'tabular',
  description: 'Titanic-like survival: normalisation + vocabularies -> MLP -> label and probability',
  input: Passenger,
  output: Prediction,
  stages: [preprocess, mlp, postprocess],
})

export default defineConfig({ models: [tabular] })
