/**
 * A synthetic, separable AG-News-like data set: four classes (World, Sports, Business, Sci/Tech)
 * whose headlines mix class-specific words with shared filler words and a little cross-class noise.
 * Seeded, so the same seed always gives the same texts.
 * @module
 */
import { mulberry32 } from '@cohort/onnx-builder'

/** Class labels, in the order of the classifier's logits. */
export const LABELS = ['World', 'Sports', 'Business', 'Sci/Tech'] as const

/** One of {@link LABELS}. */
export type Label = (typeof LABELS)[number]

/** Words that mark each class (index = class). */
export const CLASS_WORDS: readonly (readonly string[])[] = [
  // World
  [
    'government',
    'minister',
    'election',
    'parliament',
    'president',
    'embassy',
    'diplomats',
    'treaty',
    'ceasefire',
    'refugees',
    'border',
    'military',
    'troops',
    'sanctions',
    'protest',
    'foreign',
    'rebels',
    'capital',
    'summit',
    'coalition',
    'referendum',
    'opposition',
    'peace',
    'envoy',
    'regime',
    'province',
    'insurgents',
    'vote',
  ],
  // Sports
  [
    'football',
    'match',
    'goal',
    'championship',
    'league',
    'coach',
    'tournament',
    'season',
    'striker',
    'playoff',
    'olympic',
    'medal',
    'quarterback',
    'tennis',
    'cricket',
    'stadium',
    'victory',
    'defeat',
    'injury',
    'racing',
    'marathon',
    'basketball',
    'baseball',
    'innings',
    'referee',
    'cup',
    'champions',
    'golf',
  ],
  // Business
  [
    'stocks',
    'shares',
    'profit',
    'earnings',
    'revenue',
    'investors',
    'market',
    'bank',
    'merger',
    'acquisition',
    'quarterly',
    'economy',
    'inflation',
    'interest',
    'rates',
    'oil',
    'prices',
    'dollar',
    'retail',
    'sales',
    'executive',
    'dividend',
    'bonds',
    'index',
    'forecast',
    'tax',
    'budget',
    'airline',
  ],
  // Sci/Tech
  [
    'software',
    'internet',
    'computer',
    'research',
    'scientists',
    'space',
    'nasa',
    'satellite',
    'chip',
    'processor',
    'browser',
    'wireless',
    'network',
    'genome',
    'physics',
    'telescope',
    'robot',
    'algorithm',
    'smartphone',
    'microsoft',
    'google',
    'linux',
    'server',
    'laboratory',
    'quantum',
    'battery',
    'spacecraft',
    'online',
  ],
]

/** Words shared by every class. */
export const FILLER_WORDS: readonly string[] = [
  'the',
  'a',
  'of',
  'in',
  'on',
  'said',
  'today',
  'new',
  'after',
  'report',
  'week',
  'year',
  'people',
  'over',
  'more',
  'first',
  'two',
  'last',
  'could',
  'would',
  'with',
  'from',
  'by',
  'as',
  'for',
  'at',
  'will',
  'has',
  'was',
  'is',
  'that',
  'this',
  'an',
  'its',
  'and',
  'to',
  'news',
  'monday',
  'tuesday',
  'thursday',
  'officials',
  'according',
  'latest',
  'big',
  'early',
  'plans',
  'record',
  'amid',
  'despite',
  'while',
  'major',
  'announced',
]

/** One labelled text. */
export interface Example {
  readonly text: string
  /** Index into {@link LABELS}. */
  readonly label: number
}

/** Options of {@link syntheticDataset}. */
export interface SyntheticOptions {
  /** PRNG seed. @default 1 */
  readonly seed?: number
  /** Fewest words per text. @default 4 */
  readonly minWords?: number
  /** Most words per text (long texts exercise truncation). @default 48 */
  readonly maxWords?: number
  /** Chance that a word is a class word of the text's own class. @default 0.3 */
  readonly classRate?: number
  /** Chance that a word is a class word of another class (noise). @default 0.05 */
  readonly noiseRate?: number
}

/**
 * `n` labelled texts, classes in round-robin order (balanced), each with at least two words of its
 * own class. Deterministic for a given seed and options.
 */
export function syntheticDataset(n: number, opts: SyntheticOptions = {}): Example[] {
  const { seed = 1, minWords = 4, maxWords = 48, classRate = 0.3, noiseRate = 0.05 } = opts
  const rand = mulberry32(seed)
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T
  const out: Example[] = []
  for (let i = 0; i < n; i++) {
    const label = i % LABELS.length
    const own = CLASS_WORDS[label] as readonly string[]
    const len = minWords + Math.floor(rand() * (maxWords - minWords + 1))
    const words: string[] = []
    for (let w = 0; w < len; w++) {
      const r = rand()
      if (r < classRate) words.push(pick(own))
      else if (r < classRate + noiseRate) words.push(pick(CLASS_WORDS[(label + 1 + Math.floor(rand() * 3)) % 4] as readonly string[]))
      else words.push(pick(FILLER_WORDS))
    }
    // At least two words of its own class, at random positions: every text is classifiable.
    const p1 = Math.floor(rand() * len)
    words[p1] = pick(own)
    words[(p1 + 1 + Math.floor(rand() * (len - 1))) % len] = pick(own)
    const first = words[0] as string
    words[0] = first.charAt(0).toUpperCase() + first.slice(1)
    out.push({ text: `${words.join(' ')}.`, label })
  }
  return out
}
