/**
 * The version of Cohort's packages (every workspace shares it): `GET /v2`, gRPC `ServerMetadata`
 * and the workers' NATS service info answer it. A test (apps/gateway/src/index.test.ts) checks it against the apps' package.json `version`.
 */
export const COHORT_VERSION = '0.1.0'
