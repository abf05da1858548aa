// Type-aware lint of the whole repository (`npm run lint`, run by .ci/run, not by `npm test`).
// The import-cycle check is madge (`npm run lint:cycles`), also part of `npm run lint`.
import tseslint from 'typescript-eslint'

export default tseslint.config(
  {
    ignores: ['**/node_modules/**', '**/dist/**', '**/.venv/**', 'test/peers/**/*.py', '**/*.js', '**/*.cjs', '**/*.mjs'],
  },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.base],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    // Product code never imports the test harness (the bench workspace and the tests may).
    files: ['libs/*/src/**/*.ts', 'apps/*/src/**/*.ts', 'examples/*/src/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['@cohort/test-support', '@cohort/test-support/*', '**/test/support/**'], message: 'test support stays out of product code' }] },
      ],
    },
  },
)
