/**
 * Help in the `git`/`docker` layout: `cohort --help` is a short list of commands; `cohort <command>
 * --help` gives that command's flags only, grouped (model, batching, pipelines, HTTP, NATS, security,
 * observability), then examples. The flag lines themselves live next to the flags they describe.
 * @module
 */

/** One group of a command's flags, already laid out (`  --flag VALUE  text`, 2-space indent). */
export interface HelpSection {
  title: string
  text: string
}

export interface CommandHelp {
  usage: string
  about: string
  sections: HelpSection[]
  examples: string[]
}

/** The help text of one command. */
export function renderHelp(h: CommandHelp): string {
  return [`usage: ${h.usage}`, '', h.about, ...h.sections.flatMap((s) => ['', `${s.title}:`, s.text]), '', 'Examples:', ...h.examples.map((e) => `  ${e}`)].join('\n')
}

/** The `--flag` names a help text documents (the first token of each flag line). */
export function helpFlags(text: string): string[] {
  return [...text.matchAll(/^ {2}(?:-\w, )?--([a-z0-9-]+)/gm)].flatMap((m) => (m[1] === undefined ? [] : [m[1]]))
}

/** The top-level help. */
export function topHelp(version: string): string {
  return `usage: cohort <command> [options]

Cohort ${version}: serve ONNX models and TypeScript predictors over HTTP (Open Inference Protocol,
Cog-style predictions), batching requests onto the hardware; NATS between gateways and workers.

Commands:
  serve          gateway and worker in one process (the quick start; --nats URL puts NATS between)
  gateway        the stateless HTTP gateway, publishing requests to NATS
  worker         a worker serving models (or pipeline stages) from NATS, batching requests
  bridge redis   Redis Streams ingress: predictions queued in Redis, run on the workers
  bench          benchmarks of the source checkout (cohort bench --help lists them)
  demo-model     write the demo model and print its path

Options:
  -h, --help     this help
  -v, --version  print the version

Run 'cohort <command> --help' for a command's flags (docs: README.md, docs/).

Examples:
  cohort serve                                       # the demo model on http://127.0.0.1:8080
  cohort serve --model resnet=./resnet50.onnx --port 8000
  cohort worker --nats nats://127.0.0.1:4222 --model resnet=./resnet50.onnx
  cohort gateway --nats nats://127.0.0.1:4222 --port 8080`
}
