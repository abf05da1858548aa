/**
 * The exports of a user's module as its author wrote them. A `.ts` file in a folder whose
 * package.json is not `"type": "module"` (npm init's default) is compiled to CommonJS by tsx, and
 * `import()` of it yields `{ default: { __esModule: true, default, ...named } }`: this returns the
 * inner object then, the namespace itself otherwise. (predictor-host.mjs does the same inline.)
 */
export function moduleExports(mod: Record<string, unknown>): Record<string, unknown> {
  const d = mod['default']
  if (typeof d === 'object' && d !== null && (d as { __esModule?: unknown }).__esModule === true) {
    return d as Record<string, unknown>
  }
  return mod
}
