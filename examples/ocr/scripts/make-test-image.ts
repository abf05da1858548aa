/**
 * Renders examples/ocr/test/hello.png, the OCR example's test image, reproducibly (byte for byte):
 * three lines of black Liberation Serif 30 pt on white, 384 x 160, drawn with pureimage (a pure-JS
 * canvas) and encoded as an 8-bit grey PNG with pngjs.
 *
 *   npx tsx examples/ocr/scripts/make-test-image.ts [font.ttf]
 *
 * The font defaults to Debian's fonts-liberation
 * (/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf).
 */
import { writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { PNG } from 'pngjs'
import * as PImage from 'pureimage'
import { TEST_LINES } from '../test/hello.ts'

const WIDTH = 384
const HEIGHT = 160
const FONT_PT = 30
/**
 * Gap between words, in widths of the font's space. PaddleOCR's recogniser (trained mostly on
 * Chinese) is least sure of spaces; at 1.5 spaces every word break is read with p >= 0.77 even
 * from a JPEG (quality 50) of the image, and the text survives +-30 levels of pixel noise.
 */
const WORD_GAP = 1.5

function main(): void {
  const fontPath = process.argv[2] ?? '/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf'
  PImage.registerFont(fontPath, 'TestFont').loadSync()
  const img = PImage.make(WIDTH, HEIGHT)
  const ctx = img.getContext('2d')
  ctx.fillStyle = '#ffffff'
  ctx.fillRect(0, 0, WIDTH, HEIGHT)
  ctx.fillStyle = '#000000'
  ctx.font = `${FONT_PT}pt TestFont`
  TEST_LINES.forEach((line, i) => {
    let x = 24
    for (const word of line.split(' ')) {
      ctx.fillText(word, x, 42 + i * 46)
      x += ctx.measureText(word).width + WORD_GAP * ctx.measureText(' ').width
    }
  })
  const png = new PNG({ width: WIDTH, height: HEIGHT })
  png.data = Buffer.from(img.data.buffer, img.data.byteOffset, img.data.byteLength)
  const out = join(dirname(fileURLToPath(import.meta.url)), '..', 'test', 'hello.png')
  writeFileSync(out, PNG.sync.write(png, { colorType: 0 }))
  console.log(`wrote ${out}`)
}

main()
