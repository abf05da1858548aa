// The committed dashboard bundle is what its TypeScript and CSS sources build to now (run
// `npm run build:dashboard` after editing dashboard-client/).
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { BUNDLE_PATH, buildDashboardBundle } from './dashboard-build.ts'

describe('dashboard bundle', () => {
  it('is up to date with dashboard-client/ (else: npm run build:dashboard)', async () => {
    const fresh = await buildDashboardBundle()
    const committed = readFileSync(BUNDLE_PATH, 'utf8')
    expect(committed === fresh, 'apps/gateway/src/routes/dashboard-bundle.ts is stale: run npm run build:dashboard').toBe(true)
  })

  it('holds a script without Node APIs and the page that loads it', async () => {
    const { DASHBOARD_HTML, DASHBOARD_JS, DASHBOARD_CSS } = await import('./dashboard-bundle.ts')
    expect(DASHBOARD_HTML).toContain('<script src="dashboard/app.js" defer></script>')
    expect(DASHBOARD_HTML).toContain('id="auth-key"')
    expect(DASHBOARD_JS).toContain('dashboard/data')
    expect(DASHBOARD_JS).not.toMatch(/\brequire\(|\bimport\s|process\.|node:/)
    expect(DASHBOARD_CSS).toContain('.kpi')
  })
})
