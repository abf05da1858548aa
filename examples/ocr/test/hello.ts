/**
 * The text of test/hello.png, one entry per line (scripts/make-test-image.ts renders it; the
 * OCR tests read it back).
 */
export const TEST_LINES = ['COHORT 2026', 'Hello world', 'batch 42 boxes'] as const

/** Where test/hello.png is (a file: URL). */
export const HELLO_PNG_URL = new URL('./hello.png', import.meta.url)
