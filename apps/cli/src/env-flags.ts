/**
 * Flags a container sets by environment (docker/Dockerfile, infra/k8s): each applies only where the
 * command line does not give the flag. `PORT` (serve, gateway) and `NATS_URL` are read where those
 * flags are; these are the rest:
 * - `COHORT_HOST`: `--host` of serve and gateway (default 127.0.0.1);
 * - `COHORT_METRICS_HOST`: the worker's `--metrics-host` (default 127.0.0.1);
 * - `COHORT_MODELS`: `--model` specs, separated by whitespace, when no `--model`, `--predictor` or
 *   `--generative` is given (`COHORT_MODELS="demo resnet=/models/resnet.onnx,max-batch-size=16"`);
 * - `COHORT_MODEL_REPOSITORY`: `--model-repository DIR` (the images set /models, their volume).
 */
export const ENV_FLAGS_HELP = `  environment, each where its flag is not given: COHORT_HOST (--host), COHORT_METRICS_HOST
                         (--metrics-host), COHORT_MODELS (--model specs, whitespace-separated),
                         COHORT_MODEL_REPOSITORY (--model-repository), PORT (--port), NATS_URL (--nats)`

type Values = Record<string, string | boolean | string[] | undefined>

/** The default of `--host` / `--metrics-host`: the variable, else 127.0.0.1. */
export function hostDefault(name: 'COHORT_HOST' | 'COHORT_METRICS_HOST', env: NodeJS.ProcessEnv = process.env): string {
  const h = env[name]?.trim()
  return h ? h : '127.0.0.1'
}

/** Fill `model` and `model-repository` in `v` (parsed flags) from the environment where not given. */
export function modelsFromEnv(v: Values, env: NodeJS.ProcessEnv = process.env): void {
  const none = (k: string) => v[k] === undefined || (Array.isArray(v[k]) && v[k].length === 0)
  const models = (env['COHORT_MODELS'] ?? '').split(/\s+/).filter(Boolean)
  if (models.length > 0 && none('model') && none('predictor') && none('generative')) {
    v['model'] = models
  }
  const repo = env['COHORT_MODEL_REPOSITORY']?.trim()
  if (repo && v['model-repository'] === undefined) {
    v['model-repository'] = repo
  }
}
