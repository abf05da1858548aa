/**
 * AG-News-like text classification, served as the model `text`:
 *
 *   POST /models/text/predictions  {"input": {"text": "...", "top_k": 2}}
 *   -> {"output": {"labels": [{"label": "Sports", "score": 0.93}, ...]}}
 *
 * preprocess (TS: GPT-2 BPE via gpt-tokenizer, truncate to 64 tokens, pad to a length bucket
 * 8/16/32/64 with an attention mask) -> model (ONNX embedding bag, trained by train.ts, one batch
 * per bucket; a fan-out of one, so top_k travels beside the tensors) -> postprocess (TS: softmax,
 * top-k). See README.md.
 */
import { Type, defineConfig, definePipeline, fanOut, onnxStage, stage, type ItemTensor } from '@cohort/pipeline'
import { ensureTextModel } from './src/model-file.ts'
import { LABELS } from './src/synthetic.ts'
import { mergeLogits, postprocessItems, preprocessItems, type Encoded, type Scored, type TextPrediction, type TextRequest } from './src/stages.ts'

export default defineConfig({
  models: [
    definePipeline({
      name: 'text',
      description: `AG-News-like topic classification (${LABELS.join(', ')}) of a short English text`,
      input: Type.Object({
        text: Type.String({ minLength: 1, description: 'the text to classify (first 64 GPT-2 tokens are used)' }),
        top_k: Type.Integer({ default: 2, minimum: 1, maximum: LABELS.length, description: 'how many labels to return' }),
      }),
      output: Type.Object({
        labels: Type.Array(Type.Object({ label: Type.String(), score: Type.Number() })),
      }),
      deadlineMs: 10_000,
      stages: [
        stage<TextRequest, Encoded>({ name: 'preprocess', run: (items) => preprocessItems(items), batch: { maxBatchSize: 64 } }),
        fanOut<Encoded, Record<string, ItemTensor>, Record<string, ItemTensor>, Scored | Error>({
          name: 'classify',
          split: (e) => [e.tensors],
          stage: onnxStage({ name: 'model', model: ensureTextModel(), batch: { maxBatchSize: 64 } }),
          merge: mergeLogits,
        }),
        stage<Scored, TextPrediction>({ name: 'postprocess', run: (items) => postprocessItems(items), batch: { maxBatchSize: 64 } }),
      ],
    }),
  ],
})
